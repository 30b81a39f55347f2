"""What a table's watch notes as touched: every round an event changed is among the rounds the
watch says it touched, so the detectors' commit, which encodes only those again
(``anomaly_detection/app.py``), never leaves a changed round as it was written before. Checked
on every event of a recorded floor with every round and settlement irregularity injected, its
three streams interleaved as the live service may read them, and delivered twice."""

from __future__ import annotations

import random
from collections.abc import Iterable

import msgspec
import pytest

from surveil.core.findings import AlertCode
from surveil.core.profiles import DEFAULT_PROFILE, load_profile
from surveil.detect.watch import TableState, TableWatch
from surveil.embedded.record import record
from surveil.events import models as m
from surveil.sim.floor import Floor
from surveil.sim.injections import SCOPES, InjectionError, Scope, check_codes

_encode = msgspec.msgpack.Encoder().encode


def injectable() -> list[AlertCode]:
    """Every round and settlement irregularity the default profile lets the table side cause."""
    usable = []
    for code, scope in SCOPES.items():
        try:
            check_codes([code], load_profile(DEFAULT_PROFILE), 2)
        except InjectionError:
            continue
        if scope in (Scope.ROUND, Scope.SETTLEMENT):
            usable.append(code)
    return usable


@pytest.fixture(scope="module")
def floor() -> list[m.Event]:
    events: list[m.Event] = []
    record(Floor(tables=3, shoes=2, seed=29, inject=injectable() * 2), events.append, lambda label: None)
    return events


def interleaved(events: list[m.Event], seed: int) -> list[m.Event]:
    """The shoe, table and settlement streams merged at random, each in its own order."""
    rng = random.Random(seed)
    streams = [[e for e in events if e.topic == topic] for topic in sorted({e.topic for e in events})]
    merged, at = [], [0] * len(streams)
    while any(at[i] < len(s) for i, s in enumerate(streams)):
        i = rng.choice([i for i, s in enumerate(streams) if at[i] < len(s)])
        run = rng.randint(1, 60)  # a batch of one stream, as a fetch brings it
        merged += streams[i][at[i] : at[i] + run]
        at[i] += run
    return merged


def untouched_changes(events: Iterable[m.Event]) -> tuple[int, list[tuple[str, str]]]:
    """Each event through its table's watch; the rounds it changed that the watch did not note,
    as (event type, round id), and how many rounds changed in all."""
    watches: dict[str, TableWatch] = {}
    missed, changed = [], 0
    for event in events:
        watch = watches.setdefault(event.subject, TableWatch(TableState(event.subject)))
        before = {round_id: _encode(watched) for round_id, watched in watch.state.rounds.items()}
        watch.feed(event)
        for round_id, watched in watch.state.rounds.items():
            if before.get(round_id) != _encode(watched):
                changed += 1
                if round_id not in watch.touched:
                    missed.append((event.event_type, round_id))
    for watch in watches.values():
        before = {round_id: _encode(watched) for round_id, watched in watch.state.rounds.items()}
        watch.flush()
        changed += sum(before.get(r) != _encode(w) for r, w in watch.state.rounds.items())
        missed += [("flush", r) for r, w in watch.state.rounds.items() if before.get(r) != _encode(w) and r not in watch.touched]
    return changed, missed


@pytest.mark.parametrize("seed", [None, 1, 2, 3])
def test_every_round_an_event_changes_is_among_those_it_touched(floor: list[m.Event], seed: int | None) -> None:
    events = floor if seed is None else interleaved(floor, seed)
    changed, missed = untouched_changes(events)
    assert changed > 1000 and missed == []


def test_an_event_delivered_again_touches_what_it_changes(floor: list[m.Event]) -> None:
    changed, missed = untouched_changes(e for event in interleaved(floor, 4) for e in (event, event))
    assert changed > 1000 and missed == []


def test_the_watch_notes_only_what_the_event_is_about(floor: list[m.Event]) -> None:
    """Not every round every time: a bet names its round, and a card read touches none unless it
    lets a round be checked."""
    watch = TableWatch(TableState(floor[0].subject))
    sizes = []
    for event in (e for e in floor if e.subject == floor[0].subject):
        watch.feed(event)
        if isinstance(event, m.BetPlaced):
            assert watch.touched == {event.data.round_id}
        sizes.append(len(watch.touched))
    assert len(watch.state.rounds) > 5 and sum(sizes) < len(sizes) * 2
