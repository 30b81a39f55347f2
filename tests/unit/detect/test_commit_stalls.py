"""A commit of the detectors' worker that waits on a Kafka consumer whose client has lost its
metadata task stops the worker at once, saying why, rather than waiting out its bound: every
lookup of the group coordinator awaits that task, so the commit would never return (after a
broker's kill -9, the worker waited 300 s). One that merely waits stops at its bound."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from faust.transport.drivers import aiokafka
from faust.types import TP

from surveil.anomaly_detection import transport
from surveil.anomaly_detection.transport import App, CommitStalled, Consumer

PARTITION = TP("baccarat.table", 0)


def stalled_consumer(
    loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch, metadata_task: asyncio.Task[Any]
) -> tuple[Consumer, list[BaseException]]:
    """A worker's consumer whose offsets' commit never returns, its Kafka client's metadata task
    ``metadata_task``; and the list its crashes go to."""
    app = App("stalls", broker="kafka://127.0.0.1:1", web_enabled=False, loop=loop)  # never connects
    consumer = app.consumer
    assert isinstance(consumer, Consumer)

    async def never(*args: Any, **kwargs: Any) -> bool:
        await asyncio.Event().wait()
        return True

    async def written(*args: Any) -> None:
        return None

    crashes: list[BaseException] = []

    async def crash(reason: BaseException) -> None:
        crashes.append(reason)

    client = SimpleNamespace(_sync_task=metadata_task, _md_update_fut=loop.create_future(), _md_update_waiter=loop.create_future())
    kafka_consumer = SimpleNamespace(_client=client, _coordinator=SimpleNamespace(coordinator_id=None))
    monkeypatch.setattr(aiokafka.Consumer, "_commit_offsets", never)
    monkeypatch.setattr(app, "before_commit", written)
    monkeypatch.setattr(app, "commit_timeout", 1.0)
    monkeypatch.setattr(consumer, "assignment", lambda: {PARTITION})
    monkeypatch.setattr(consumer, "crash", crash)
    monkeypatch.setattr(consumer, "_thread", SimpleNamespace(thread_loop=None, _ensure_consumer=lambda: kafka_consumer))
    monkeypatch.setattr(transport, "SLOW_COMMIT_S", 0.05)
    return consumer, crashes


def test_a_commit_on_a_consumer_without_its_metadata_task_stops_the_worker_at_once(
    loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def synchronizer() -> None:
        raise RuntimeError("the metadata task's own failure")

    ended = loop.create_task(synchronizer())
    loop.run_until_complete(asyncio.wait([ended]))
    consumer, crashes = stalled_consumer(loop, monkeypatch, ended)
    started = loop.time()
    assert loop.run_until_complete(consumer._commit_offsets({PARTITION: 5})) is False
    assert loop.time() - started < 0.5  # its bound is 1 s
    (reason,) = crashes
    assert isinstance(reason, CommitStalled)
    assert "the Kafka consumer's metadata task ended: RuntimeError(\"the metadata task's own failure\")" in str(reason), reason
    assert "stopping the worker, to be restarted from its last commit" in str(reason)


def test_a_commit_on_a_consumer_whose_metadata_task_runs_waits_out_its_bound(
    loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = loop.create_task(asyncio.Event().wait())
    consumer, crashes = stalled_consumer(loop, monkeypatch, running)
    started = loop.time()
    assert loop.run_until_complete(consumer._commit_offsets({PARTITION: 5})) is False
    assert loop.time() - started >= 1.0
    (reason,) = crashes
    assert "for the offsets' commit: stopping the worker" in str(reason), reason
    assert "metadata task" not in str(reason)
    running.cancel()
    loop.run_until_complete(asyncio.wait([running]))
