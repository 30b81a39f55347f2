"""A replay split across worker processes (``surveil replay --workers N``) is the same replay: the
same alerts in the same order and chain, the same bad lines, the same counts, and ``on_event``
and ``on_alert`` called in the same interleaving as by one process."""

from __future__ import annotations

import os

import pytest

from surveil.analysis import replay as replay_module
from surveil.analysis.replay import ReplayResult, Router, Shard, replay
from surveil.embedded.record import record
from surveil.events import codec
from surveil.events import models as m
from surveil.sim.floor import Floor
from surveil.sim.injections import parse_codes

INJECT = "DRAW_BANKER_EXTRA,LATE_BET,CARD_MISMATCH,PAYOUT_MISMATCH,PATRON_WIN_RATE,DEALER_ERROR_RATE,UNSETTLED_BET,CARD_OVERCOUNT"


NOT_JSON, NO_SUBJECT, ONLY_A_SUBJECT = b"not json\n", b'{"type": "baccarat.card.read"}\n', b'{"subject": "T001"}\n'
NOT_EVENTS = (NOT_JSON, NO_SUBJECT, ONLY_A_SUBJECT)


@pytest.fixture(scope="module")
def log() -> list[bytes]:
    """Four tables with irregularities, and lines that are not events among them."""
    events: list[m.Event] = []
    record(Floor(tables=4, shoes=2, seed=17, inject=parse_codes(INJECT)), events.append, lambda label: None)
    lines = [codec.encode(event) + b"\n" for event in events]
    lines[5:5] = [b"\n", NOT_JSON, NO_SUBJECT]
    lines[len(lines) // 2 : len(lines) // 2] = [b"   \n", ONLY_A_SUBJECT]
    return lines


def calls_and_result(lines: list[bytes], workers: int) -> tuple[list[tuple[str, str]], ReplayResult]:
    calls: list[tuple[str, str]] = []
    result = replay(
        iter(lines),
        on_event=lambda event: calls.append(("event", event.id)),
        on_alert=lambda alert: calls.append(("alert", alert.id)),
        workers=workers,
    )
    return calls, result


@pytest.mark.parametrize("workers", [2, 3])
def test_any_number_of_workers_replays_as_one_process(log: list[bytes], workers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay_module, "BATCH_LINES", 97)  # many batches, more of them in flight than IN_FLIGHT
    one_calls, one = calls_and_result(log, 1)
    many_calls, many = calls_and_result(log, workers)
    assert {a.data.rule for a in one.alerts} >= set(INJECT.split(","))
    assert [codec.encode(a) for a in many.alerts] == [codec.encode(a) for a in one.alerts]  # chain included
    assert many_calls == one_calls
    assert many.bad_lines == one.bad_lines
    assert [bad.number for bad in one.bad_lines] == [number for number, line in enumerate(log, start=1) if line in NOT_EVENTS]
    assert (many.events, many.events_by_type, many.rounds_checked, many.tables) == (
        one.events,
        one.events_by_type,
        one.rounds_checked,
        one.tables,
    )
    assert one.tables == 4


def test_without_on_event_the_workers_raise_the_same_alerts(log: list[bytes]) -> None:
    assert [codec.encode(a) for a in replay(iter(log), workers=2).alerts] == [codec.encode(a) for a in replay(iter(log)).alerts]


def test_shards_take_every_table_once_and_each_whole(log: list[bytes]) -> None:
    shards = [Shard(None) for _ in range(3)]
    for shard, share in zip(shards, Router(3).route((1, log))):
        shard.feed(share)
    owned = [set(shard.floor.tables) for shard in shards]
    assert sorted(table for tables in owned for table in tables) == ["T001", "T002", "T003", "T004"]
    assert sorted(len(tables) for tables in owned) == [1, 1, 2]  # dealt in turn as they first appear
    assert sum(len(shard.bad_lines) for shard in shards) == len(NOT_EVENTS)
    assert log.index(NOT_JSON) + 1 in [bad.number for bad in shards[0].bad_lines]  # what has no subject to go by: the first


def test_a_failing_worker_fails_the_replay_with_its_traceback(log: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: Shard, batch: object) -> list[object]:
        raise ValueError("a bug in a detector")

    monkeypatch.setattr(Shard, "feed", broken)  # before the fork, so the workers have it
    with pytest.raises(RuntimeError, match="(?s)replay worker failed.*a bug in a detector"):
        replay(iter(log), workers=2)


def test_a_worker_that_dies_fails_the_replay(log: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed outright (the OOM killer, kill -9) it tells nothing: the replay says it died, and does not wait for ever."""

    def dies(self: Shard, batch: object) -> list[object]:
        os._exit(3)

    monkeypatch.setattr(Shard, "feed", dies)
    with pytest.raises(RuntimeError, match=r"replay worker \d+ died \(exit 3\)"):
        replay(iter(log), workers=2)
