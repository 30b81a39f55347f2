"""The detectors' fetches gather while records keep coming: after a fetch that brought records the
next to the same broker waits there up to ``FETCH_GATHER_MS`` for more, after one that came back
empty the next is answered at the first record (faust's own settings), so an idle worker fetches
no more often than before and the first record after a pause is not held. Per broker: one
broker's empty answers leave another's gathering alone."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.protocol.fetch import FetchRequest, FetchRequest_v11
from faust.transport.drivers import aiokafka

from surveil.anomaly_detection.transport import App, ConsumerThread, gather_fetches
from surveil.runtime.kafka import GATHER_MIN_BYTES

AT_ONCE = (1, 1500)  # faust's: answered at the first byte, an idle fetch waits 1.5 s


class Fetcher:
    """aiokafka's fetcher as far as gathering goes: each request, built with its settings, goes
    through a coroutine that sends it (here: builds it as aiokafka would, and keeps the settings
    built) and says whether a partition got records."""

    def __init__(self, brought: list[bool]) -> None:
        self._fetch_min_bytes, self._fetch_max_wait_ms = AT_ONCE
        self.brought = iter(brought)
        self.sent_with: list[tuple[int, int]] = []

    async def _proc_fetch_request(self, assignment: Any, node_id: int, request: FetchRequest) -> bool:
        built = request.build(FetchRequest_v11)
        self.sent_with.append((built.min_bytes, built.max_wait_time))
        return next(self.brought)


def request(fetcher: Fetcher) -> FetchRequest:
    """A request as aiokafka's fetcher builds each, with its settings of the moment."""
    return FetchRequest(fetcher._fetch_max_wait_ms, fetcher._fetch_min_bytes, 1 << 20, 1, [("baccarat.table", [(0, 0, 1 << 20)])])


def fetch(loop: asyncio.AbstractEventLoop, fetcher: Fetcher, times: int, node_id: int = 1) -> list[bool]:
    return [loop.run_until_complete(fetcher._proc_fetch_request(None, node_id, request(fetcher))) for _ in range(times)]


GATHERING = (GATHER_MIN_BYTES, 10)


def test_a_fetch_that_brought_records_makes_the_next_wait_and_an_empty_one_makes_it_answer_at_once(loop: asyncio.AbstractEventLoop) -> None:
    fetcher = Fetcher([True, True, False, False, True, False, True])
    gather_fetches(fetcher, 10)
    assert fetch(loop, fetcher, 7) == [True, True, False, False, True, False, True]
    assert fetcher.sent_with == [AT_ONCE, GATHERING, GATHERING, AT_ONCE, AT_ONCE, GATHERING, AT_ONCE]
    assert (fetcher._fetch_min_bytes, fetcher._fetch_max_wait_ms) == AT_ONCE  # the fetcher's own settings untouched


def test_each_broker_gathers_by_its_own_last_answer(loop: asyncio.AbstractEventLoop) -> None:
    fetcher = Fetcher([True, False, True, False, True])
    gather_fetches(fetcher, 10)
    for node_id in (1, 2, 1, 2, 1):
        fetch(loop, fetcher, 1, node_id)
    # broker 1 brought records each time, broker 2 none: 1 gathers from its second fetch on, 2 never
    assert fetcher.sent_with == [AT_ONCE, AT_ONCE, GATHERING, AT_ONCE, GATHERING]


def test_no_gathering_leaves_every_fetch_answered_at_once(loop: asyncio.AbstractEventLoop) -> None:
    fetcher = Fetcher([True, True, False])
    gather_fetches(fetcher, 0)
    fetch(loop, fetcher, 3)
    assert fetcher.sent_with == [AT_ONCE] * 3


def test_the_workers_consumer_thread_gathers_its_fetchers_fetches_by_the_apps_setting(
    loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = App("gathering", broker="kafka://127.0.0.1:1", web_enabled=False, loop=loop)  # never connects
    monkeypatch.setattr(app, "fetch_gather_ms", 7)
    thread = app.consumer._thread
    assert isinstance(thread, ConsumerThread)
    fetcher = Fetcher([True, True])

    async def started(self: Any) -> None:  # aiokafka's consumer started: its fetcher made
        self._consumer = SimpleNamespace(_fetcher=fetcher)

    monkeypatch.setattr(aiokafka.AIOKafkaConsumerThread, "on_start", started)
    loop.run_until_complete(thread.on_start())
    fetch(loop, fetcher, 2)
    assert fetcher.sent_with == [AT_ONCE, (GATHER_MIN_BYTES, 7)]
