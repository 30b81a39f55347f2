"""Duplicated, reordered and late events: an event seen again (the same id) is the same event
delivered again, whatever brought it back (a transaction its producer aborted and then committed
again, a retry, a log recorded twice), and the detectors wait for what they need across streams;
only a *different* event for the same thing (a second settlement) is an irregularity."""

from __future__ import annotations

import random

import msgspec
import pytest

from surveil.analysis.replay import replay
from surveil.detect.watch import _HANDLERS as HANDLED
from surveil.detect.watch import RECENT_IDS, TableState, TableWatch, _in_window, id_digest
from surveil.embedded.record import record
from surveil.events import codec, topics
from surveil.events import models as m
from surveil.sim.floor import Floor
from surveil.sim.injections import parse_codes

INJECT = "DRAW_BANKER_EXTRA,LATE_BET,CARD_MISMATCH,PAYOUT_MISMATCH"


@pytest.fixture(scope="module")
def floor() -> list[m.Event]:
    events: list[m.Event] = []
    record(Floor(tables=2, shoes=1, seed=61, inject=parse_codes(INJECT)), events.append, lambda label: None)
    return events


def alert_ids(events: list[m.Event]) -> list[str]:
    return sorted(a.data.alert_id for a in replay(iter(codec.encode(e) for e in events)).alerts)


def test_the_floor_raises_the_injected_alerts(floor: list[m.Event]) -> None:
    rules = {a.data.rule for a in replay(iter(codec.encode(e) for e in floor)).alerts}
    assert set(INJECT.split(",")) <= rules


def test_every_event_delivered_twice_raises_the_same_alerts(floor: list[m.Event]) -> None:
    twice = [e for event in floor for e in (event, event)]
    assert alert_ids(twice) == alert_ids(floor)


def test_an_aborted_transactions_copy_before_its_committed_retry_changes_nothing(floor: list[m.Event]) -> None:
    """Batches of a topic written, aborted, and written again (read uncommitted: both copies)."""
    rng = random.Random(7)
    delivered: list[m.Event] = []
    start = 0
    while start < len(floor):
        end = start + rng.randint(1, 200)
        batch = floor[start:end]
        if rng.random() < 0.3:
            delivered += batch[: rng.randint(1, len(batch))]  # the aborted attempt, cut anywhere
        delivered += batch
        start = end
    assert len(delivered) > len(floor)
    assert alert_ids(delivered) == alert_ids(floor)


def test_the_streams_interleaved_differently_raise_the_same_alerts(floor: list[m.Event]) -> None:
    """Late events: each topic keeps its order, but the shoe, table and settlement streams arrive
    shifted against each other (a consumer behind on one of them)."""
    by_topic = {topic: [e for e in floor if e.topic == topic] for topic in (topics.SHOE, topics.TABLE, topics.SETTLEMENT)}
    rng = random.Random(11)
    merged: list[m.Event] = []
    while any(by_topic.values()):
        topic = rng.choice([t for t, events in by_topic.items() if events])
        take = rng.randint(1, 60)
        merged += by_topic[topic][:take]
        del by_topic[topic][:take]
    assert alert_ids(merged) == alert_ids(floor)


def test_a_second_settlement_with_its_own_id_is_still_an_alert(floor: list[m.Event]) -> None:
    settled = next(e for e in floor if isinstance(e, m.BetSettled))
    again = msgspec.structs.replace(settled, id=settled.id + "/again")
    at = floor.index(settled) + 1
    rules = [a.data.rule for a in replay(iter(codec.encode(e) for e in [*floor[:at], again, *floor[at:]])).alerts]
    assert rules.count("DUPLICATE_SETTLEMENT") == 1


def test_the_window_of_seen_ids_is_the_tables_last_events(floor: list[m.Event]) -> None:
    """What the state keeps (and stores with every event, live) is bounded: the last RECENT_IDS ids."""
    table = floor[0].subject
    own = [e for e in floor if e.subject == table and e.topic in (topics.SHOE, topics.TABLE, topics.SETTLEMENT)]
    assert len(own) > RECENT_IDS
    watch = TableWatch(TableState(table))
    for event in own:
        watch.feed(event)
    handled = [e.id for e in own if type(e) in HANDLED]
    ring, oldest = watch.state.recent_digests, watch.state.recent_next * len(id_digest(""))
    assert oldest  # the ring went round
    assert ring[oldest:] + ring[:oldest] == b"".join(id_digest(i) for i in handled[-RECENT_IDS:])


def test_a_window_stored_oldest_first_reads_as_a_ring(floor: list[m.Event]) -> None:
    """A state stored before the window was a ring (its digests oldest first, no ``recent_next``)
    goes on seeing the same ids again: its oldest digest is the first written over."""
    table = floor[0].subject
    own = [e for e in floor if e.subject == table and type(e) in HANDLED][: RECENT_IDS + 1]
    stored = msgspec.json.encode(TableState(table, recent_digests=bytearray(b"".join(id_digest(e.id) for e in own[:RECENT_IDS]))))
    before_the_ring = stored.replace(b',"recent_next":0', b"")
    assert b"recent_next" not in before_the_ring
    state = msgspec.json.decode(before_the_ring, type=TableState)
    assert not TableWatch(state)._seen_before(own[RECENT_IDS].id)  # new: the oldest makes way for it
    assert TableWatch(state)._seen_before(own[1].id) and TableWatch(state)._seen_before(own[RECENT_IDS].id)
    assert not TableWatch(state)._seen_before(own[0].id)  # gone from the window


def test_a_table_whose_events_stop_mid_round_raises_nothing_for_what_never_came(floor: list[m.Event]) -> None:
    """One table's devices go quiet in the middle of a round (bets placed, cards dealt, no result):
    the detectors judge nothing they have not seen in full (the open round is neither a wrong
    result nor unsettled bets); the room learns of the silence from SurveilTableSilent
    (ops/prometheus/rules/alerts.yml), not from a false rule alert. The other table goes on."""
    table = floor[0].subject
    rounds = [e for e in floor if e.subject == table and isinstance(e, m.RoundCompleted)]
    stop = rounds[len(rounds) // 2]  # the table's events end just before this round's result
    cut = floor.index(stop)
    truncated = [e for i, e in enumerate(floor) if e.subject != table or i < cut]
    full = replay(iter(codec.encode(e) for e in floor)).alerts
    before = {a.data.alert_id for a in full if a.data.table_id != table or a.time < stop.time}
    assert {a.data.alert_id for a in replay(iter(codec.encode(e) for e in truncated)).alerts} == before


def test_a_digest_is_seen_only_where_one_begins() -> None:
    """The window is the digests end to end: bytes spanning two of them are not a third."""
    first, second = id_digest("T01:S0001:1"), id_digest("T01:S0001:2")
    window = first + second
    straddling = window[4:12]
    assert _in_window(window, first) and _in_window(window, second)
    assert not _in_window(window, straddling)
    assert _in_window(window + straddling, straddling)  # its own place, past the false match at 4


def test_a_table_stream_shoes_behind_the_shoe_stream_raises_nothing_extra() -> None:
    """The table stream gets going, then stalls while the shoe stream plays on through the next
    shoes (as the detectors' worker read them after a broker restart): a shoe the shoe stream
    ended is judged once the table stream has left it, not before its rounds arrived."""
    events: list[m.Event] = []
    record(Floor(tables=1, shoes=3, seed=7, inject=parse_codes(INJECT)), events.append, lambda label: None)
    events = [e for e in events if e.topic in (topics.SHOE, topics.TABLE, topics.SETTLEMENT)]
    tables = [i for i, e in enumerate(events) if e.topic != topics.SHOE]
    stall = tables[len(tables) // 6]  # a few rounds into the first shoe
    later = events[stall:]
    stalled = events[:stall] + [e for e in later if e.topic == topics.SHOE] + [e for e in later if e.topic != topics.SHOE]
    assert alert_ids(stalled) == alert_ids(events)
    assert alert_ids(events)  # the injected ones, so the comparison has something to compare


def test_a_watch_fed_from_empty_and_one_per_event_see_the_same_ids(floor: list[m.Event]) -> None:
    """Offline, a table's watch keeps its window's digests as a set too; live, a watch is made per
    event over the stored window and scans it. Both see the same events again, and only those:
    within the window, and not once a digest has left it."""
    table = floor[0].subject
    own = [e for e in floor if e.subject == table and type(e) in HANDLED][: RECENT_IDS + 50]
    again = [own[-1], own[-RECENT_IDS], own[-RECENT_IDS - 1], own[0]]  # in, in, out, out
    offline = TableWatch(TableState(table))
    live_state = TableState(table)
    seen: list[tuple[bool, bool]] = []
    for event in [*own, *again]:
        seen.append((offline._seen_before(event.id), TableWatch(live_state)._seen_before(event.id)))
    assert offline._digests is not None  # the set was kept throughout
    assert seen == [(False, False)] * len(own) + [(True, True), (True, True), (False, False), (False, False)]
    assert offline.state.recent_digests == live_state.recent_digests
