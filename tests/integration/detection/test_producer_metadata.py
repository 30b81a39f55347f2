"""The detectors' producer delivers a batch waiting for a topic it knows but had not tracked, when
a send to a topic it did not know makes its client track that one (anomaly_detection/transport.py,
``Producer``). With faust's own producer the batch waited for a leader for the 20 minutes of the
request timeout, and the worker's commits, waiting for it, stopped (docs/faults.md)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from surveil.anomaly_detection.transport import App
from surveil.runtime.config import Settings

DELIVERY_S = 20.0  # a batch goes out in milliseconds; the stuck one never did


def test_a_batch_for_a_known_topic_goes_out_when_another_topic_is_first_tracked(
    kafka_bootstrap: str, new_topic: Callable[..., str], topic_prefix: str
) -> None:
    known = new_topic("known", partitions=1)
    new_topic("declared", partitions=1)  # a topic the app declares as it starts, already there
    credentials = Settings.from_env("tests").faust_credentials()
    asyncio.run(_send_to_known_then_new(kafka_bootstrap, credentials, known, new_topic, topic_prefix))


async def _send_to_known_then_new(
    bootstrap: str, credentials: object, known: str, new_topic: Callable[..., str], topic_prefix: str
) -> None:
    # Batches linger 0.5 s, so the known topic's is still waiting when the client's tracked topics change.
    app = App(
        f"{topic_prefix}producer",
        broker=f"kafka://{bootstrap}",
        broker_credentials=credentials,
        web_enabled=False,
        producer_linger=0.5,
        topic_allow_declare=True,
    )
    producer = app.producer
    await producer.start()
    try:
        # As the worker starts: faust creates a topic, then refreshes the metadata of every topic
        # (its client tracks none): the known topic becomes known, untracked.
        await producer.create_topic(f"{topic_prefix}declared", partitions=1, replication=1)
        unknown = await asyncio.to_thread(new_topic, "created-later", 1)  # after that refresh
        waiting = asyncio.ensure_future(await producer.send(known, b"key", b"value", None, None, None))
        await producer.send(unknown, b"key", b"value", None, None, None)  # tracked: the next refresh asks for it
        done, _ = await asyncio.wait([waiting], timeout=DELIVERY_S)
        assert done, f"the batch for {known} was not delivered in {DELIVERY_S:.0f} s: its topic dropped out of the metadata"
        assert waiting.result().topic == known
    finally:
        with contextlib.suppress(TimeoutError):  # a stop flushes: a batch stuck would hold it too
            await asyncio.wait_for(producer.stop(), 10)
