"""The detectors' fetcher hands every record to the streams without committing first: commits are
the timer's (``COMMIT_INTERVAL_MS``). faust's fetcher committed itself each time 10,000 more
messages had been acked, and held the streams' input for as long as that commit (or the timer's,
under way) took."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import faust
import pytest
from faust.types import TP, Message

from surveil.anomaly_detection.transport import App

PARTITION = TP("baccarat.table", 0)
A_YEAR_OF_ACKS = 6_000 * 25 * 60 * 24 * 365  # 6,000 tables, 25 events a round, a round a minute


def fetched(app: faust.App, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch, acked: int) -> tuple[list[int], int]:
    """The offsets the fetcher handed on of three records, after ``acked`` acks, and how many commits it made."""
    app.transport.loop = loop  # the consumer's, and its events': the transport's, not the app's
    consumer = app.consumer
    consumer._n_acked = acked
    fetcher = faust.Service(loop=loop)
    handed: list[int] = []
    commits = 0

    async def getmany(timeout: float) -> AsyncIterator[tuple[TP, Message]]:
        for offset in range(3):
            yield PARTITION, Message(PARTITION.topic, PARTITION.partition, offset, 0.0, 0, [], b"t", b"v", None)
        fetcher._stopped.set()

    async def callback(message: Message) -> None:
        handed.append(message.offset)

    async def commit(*args: Any, **kwargs: Any) -> bool:
        nonlocal commits
        commits += 1
        return True

    monkeypatch.setattr(consumer, "getmany", getmany)
    monkeypatch.setattr(consumer, "callback", callback)
    monkeypatch.setattr(consumer, "commit", commit)
    loop.run_until_complete(asyncio.wait_for(consumer._drain_messages(fetcher), 5.0))
    return handed, commits


def test_the_fetcher_never_commits_however_many_messages_were_acked(
    loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = App("fetcher-commits", broker="kafka://127.0.0.1:1", web_enabled=False, loop=loop)  # never connects
    assert fetched(app, loop, monkeypatch, A_YEAR_OF_ACKS) == ([0, 1, 2], 0)


def test_fausts_own_fetcher_commits_past_its_count(loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same stand-ins on faust's own app: its fetcher commits once 10,000 acks are counted."""
    app = faust.App("fetcher-commits-faust", broker="kafka://127.0.0.1:1", web_enabled=False, loop=loop)
    assert fetched(app, loop, monkeypatch, 10_000) == ([0, 1, 2], 1)
