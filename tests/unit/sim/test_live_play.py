"""play_live's pace: every action goes out at its time or up to a tick after it, never before,
and what is due at a wake goes out together (one write of the shoe lines)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
import uvloop

from surveil.sim.live import TICK_SECONDS, LiveRun, play_live
from surveil.sim.table import ROUND_SECONDS, START, ShoeLine, TableInput


class Sent:
    """A publisher and a shoe gateway that note when each thing reached them."""

    def __init__(self) -> None:
        self.began = 0.0
        self.published: list[tuple[str, float]] = []
        self.written: list[bytes] = []
        self.drains: list[list[bytes]] = []
        self.played = LiveRun()
        self.give_up_after, self.reconnects = 5.0, 0

    def publish(self, event: Any) -> None:
        self.published.append((event, time.monotonic() - self.began))

    def flush(self) -> None:
        pass

    def write(self, table_id: str, seq: int, line: bytes) -> None:
        self.written.append(line)

    async def drain(self) -> None:
        self.drains.append(self.written)
        self.written = []

    async def wait_acknowledged(self, timeout: float) -> None:
        pass


def play(actions: list[Any], tick: float, runner: Any = asyncio.run, pace: float = ROUND_SECONDS) -> Sent:
    """``actions`` played into a ``Sent``; at pace ROUND_SECONDS a second of table time is a second."""
    sent = Sent()

    async def run() -> None:
        sent.began = time.monotonic()
        sent.played = await play_live(SimpleNamespace(actions=lambda: iter(actions)), sent, sent, pace, tick=tick)  # type: ignore[arg-type]

    runner(run())
    return sent


def inputs_at(*milliseconds: int) -> list[TableInput]:
    return [TableInput(START + timedelta(milliseconds=ms), "T01", f"at {ms} ms") for ms in milliseconds]  # type: ignore[arg-type]


def test_each_action_goes_out_at_its_time_with_no_tick() -> None:
    sent = play(inputs_at(0, 30, 60, 90), tick=0.0)
    for (event, at), ms in zip(sent.published, (0, 30, 60, 90), strict=True):
        assert event == f"at {ms} ms"
        assert at >= ms / 1000


@pytest.mark.parametrize("runner", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])  # uvloop: the bench's floor
def test_what_falls_due_within_a_tick_goes_out_at_its_end_never_before(runner: Any) -> None:
    sent = play(inputs_at(0, 10, 20, 30), tick=0.1, runner=runner)
    times = [at for _, at in sent.published]
    assert times[1] - times[0] >= 0.01  # the first wake: each at its time
    # The loop woke at 10 ms: it sleeps a tick, then sends the 20 and 30 ms inputs together.
    assert times[2] >= 0.11 and times[3] - times[2] < 0.005
    assert all(at >= ms / 1000 for at, ms in zip(times, (0, 10, 20, 30), strict=True))


def test_the_shoe_lines_due_at_a_wake_go_out_in_one_write() -> None:
    lines = [ShoeLine(START + timedelta(milliseconds=ms), "T01", seq, b"line %d\n" % seq) for seq, ms in enumerate((0, 10, 20, 30), 1)]
    sent = play(lines, tick=0.1)  # type: ignore[arg-type]
    assert sent.drains == [[b"line 1\n"], [b"line 2\n"], [b"line 3\n", b"line 4\n"]]


def test_a_floor_played_as_fast_as_it_goes_is_never_behind_its_pace() -> None:
    sent = play(inputs_at(*range(0, 600_000, 1000)), tick=TICK_SECONDS, pace=0.0)  # ten minutes of table time, no pace
    assert sent.played.most_behind == 0.0
    assert len(sent.published) == 600
