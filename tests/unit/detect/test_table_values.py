"""What the detectors write at each commit: a table's (or chart's) value keeps the outputs of its
events at or after the committed offsets of the topics keyed as it is, and drops the earlier
ones; a redelivered event still publishes its outputs again, read back from the value as written;
a record keyed otherwise is refused."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
import subprocess
import sys
import time
from collections import Counter, OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any

import msgspec
import pytest
from faust.types import TP
from prometheus_client import REGISTRY

from surveil.anomaly_detection.parts import CARRIED, is_part, part_key
from surveil.detect.watch import RECENT_ROUNDS
from surveil.embedded.record import record
from surveil.events import codec, topics
from surveil.events import models as m
from surveil.runtime.kafka import partition_for
from surveil.sim.floor import Floor
from surveil.sim.injections import parse_codes


@pytest.fixture
def app() -> Iterator[Any]:
    """The faust app's module, its tables empty and nothing changed."""
    from surveil.anomaly_detection import app

    app.forget_tables()
    yield app
    app.forget_tables()


@pytest.fixture(scope="module")
def floor() -> list[m.Event]:
    events: list[m.Event] = []
    record(Floor(tables=1, shoes=1, seed=5, inject=parse_codes("LATE_BET,PAYOUT_MISMATCH")), events.append, lambda label: None)
    return events


def name(app: Any, topic: str) -> str:
    return str(app.settings.topic(topic))


def home(app: Any, key: bytes) -> int:
    """The partition a record keyed ``key`` is on."""
    return partition_for(key, app.settings.partitions)


def assigned(app: Any) -> set[TP]:
    return {TP(name(app, t), p) for t in (topics.SHOE, topics.TABLE, topics.SETTLEMENT, app.FACTS) for p in range(app.settings.partitions)}


def feed(app: Any, events: list[m.Event], offsets: Counter[str]) -> dict[tuple[str, int], list[Any]]:
    """Each event through ``watch_record`` at the next offset of its topic, and each fact it makes
    through ``chart_record``: the outputs by (topic, offset) of what made them."""
    made: dict[tuple[str, int], list[Any]] = {}
    for event in events:
        offset = offsets[event.topic]
        offsets[event.topic] += 1
        key = event.subject.encode()
        outputs = app.watch_record(name(app, event.topic), home(app, key), offset, 0.0, key, codec.encode(event))
        made[(event.topic, offset)] = outputs
        for fact in (o for o in outputs if o.topic == "facts"):
            at = offsets["facts"]
            offsets["facts"] += 1
            made[("facts", at)] = app.chart_record(name(app, app.FACTS), home(app, fact.key), at, fact.key, fact.value)
    return made


def signalling_fact(app: Any, floor: list[m.Event]) -> tuple[bytes, int, list[Any]]:
    """Facts of a patron who wins every bet at the floor's first table, one an offset, through
    ``chart_record`` until the chart signals: the last fact, its offset and what it made."""
    table, at = floor[0].subject, floor[0].time
    outputs, offset = [], -1
    while not outputs and offset < 500:
        offset += 1
        fact = app._encode(app.PatronBet("P1", table, f"R{offset}", f"B{offset}", True, 500, at))
        outputs = app.chart_record(name(app, app.FACTS), home(app, b"patron:P1"), offset, b"patron:P1", fact)
    return fact, offset, outputs


def committed_at(app: Any, key: bytes, offsets: dict[str, int]) -> dict[TP, int | None]:
    """``offsets`` by topic as the consumer holds them: on the partition ``key`` is on."""
    partition = partition_for(key, app.settings.partitions)
    return {TP(name(app, topic), partition): offset for topic, offset in offsets.items()}


def stored_table(app: Any, table_id: str) -> Any:
    return app.stored_table(table_id.encode())


def test_a_commit_writes_only_the_outputs_of_events_at_or_after_the_committed_offsets(app: Any, floor: list[m.Event]) -> None:
    offsets: Counter[str] = Counter()
    table_id = floor[0].subject
    made = feed(app, floor, offsets)
    app.stage_changed(assigned(app), {})
    before = stored_table(app, table_id).outbox.outputs
    assert len(before) == app.RECENT_OUTPUTS  # nothing committed: the last 256, as many as kept
    # Committed: all but the last ten events of each table stream.
    committed = {t: offsets[t] - 10 for t in (topics.SHOE, topics.TABLE, topics.SETTLEMENT)}
    app._changed[table_id.encode()] = stored_table(app, table_id)
    app.stage_changed(assigned(app), committed_at(app, table_id.encode(), committed))
    kept = stored_table(app, table_id).outbox.outputs
    expected = [o for (topic, offset), outputs in made.items() if topic in committed and offset >= committed[topic] for o in outputs]
    assert kept == tuple(o for o in before if o in expected) and kept
    assert {o.source for o in kept} == {o.source for o in expected}


def test_a_commit_sends_many_tables_values_of_one_partition_in_one_batch(app: Any) -> None:
    """aiokafka keeps one request in flight to a broker, with one batch a partition: with its
    16 KB default a table's value (about 27 KB late in a shoe) was a batch, and a request, of its
    own, and a commit of 350 values took dozens of round trips, one after the other."""
    from aiokafka.producer.message_accumulator import BatchBuilder

    settings = app.app.producer._settings_default()
    assert settings["max_batch_size"] == topics.MAX_RECORD_BYTES
    batch = BatchBuilder(settings["max_batch_size"], 0, is_transactional=False, key_serializer=None, value_serializer=None)
    values = 0
    while batch.append(key=b"T%03d" % values, value=bytes(27_000), timestamp=None) is not None:
        values += 1
    assert values == 38  # a partition's values of a commit at 1,000 tables (58) in two batches
    batch.close()
    assert batch.size() <= topics.MAX_RECORD_BYTES  # what the broker takes


def counted(counter: str) -> float:
    """A counter of the worker's, as its registry holds it now (0 before its first count)."""
    return REGISTRY.get_sample_value(counter) or 0.0


def test_an_outbox_past_its_bound_counts_exactly_the_outputs_it_dropped(app: Any) -> None:
    def dropped() -> float:
        return counted("surveil_detection_outputs_dropped_total")

    def outputs(offset: int, count: int) -> list[Any]:
        return [app.Output(f"shoe:{offset}", "alerts", b"T01", bytes([i])) for i in range(count)]

    outbox, before = app.Outbox(), dropped()
    for offset in range(25):
        outbox.record("shoe", offset, outputs(offset, 10))
    assert len(outbox.outputs) == 250 and dropped() == before  # under the bound: nothing dropped
    outbox.record("shoe", 25, outputs(25, 10))
    assert dropped() == before + 4
    assert outbox.outputs == tuple(o for offset in range(26) for o in outputs(offset, 10))[4:]  # the oldest went
    outbox.record("shoe", 26, [])
    assert dropped() == before + 4 and len(outbox.outputs) == app.RECENT_OUTPUTS


def test_a_table_is_decoded_only_when_the_worker_no_longer_holds_what_it_wrote(
    app: Any, floor: list[m.Event], monkeypatch: pytest.MonkeyPatch
) -> None:
    def decoded() -> float:
        return counted("surveil_detection_tables_decoded_total")

    offsets: Counter[str] = Counter()
    before = decoded()
    feed(app, floor[:200], offsets)
    app.stage_changed(assigned(app), {})
    feed(app, floor[200:210], offsets)  # the table as this worker wrote it: no decoding
    assert decoded() == before
    monkeypatch.setattr(app, "WATCH_CACHE_TABLES", 0)  # a worker holding more tables than it keeps
    app.stage_changed(assigned(app), {})
    feed(app, floor[210:220], offsets)  # decoded for the first event, then changed in memory until the commit
    assert decoded() == before + 1
    app.stage_changed(assigned(app), {})
    feed(app, floor[220:221], offsets)
    assert decoded() == before + 2


def test_an_event_delivered_again_after_the_commit_publishes_the_same_outputs(app: Any, floor: list[m.Event]) -> None:
    offsets: Counter[str] = Counter()
    table_id = floor[0].subject
    made = feed(app, floor, offsets)
    committed = {t: offsets[t] - 10 for t in (topics.SHOE, topics.TABLE, topics.SETTLEMENT)}
    app.stage_changed(assigned(app), committed_at(app, table_id.encode(), committed))
    app._written.clear()  # a restarted worker: the values as the changelog holds them
    uncommitted = [(t, offset) for t in committed for offset in range(committed[t], offsets[t])]
    for event_topic, offset in uncommitted:
        event = [e for e in floor if e.topic == event_topic][offset]
        again = app.watch_record(name(app, event_topic), home(app, table_id.encode()), offset, 0.0, table_id.encode(), codec.encode(event))
        assert again == made[(event_topic, offset)]
    assert sum(len(made[at]) for at in uncommitted) >= 5  # they had outputs to publish again


def test_a_charts_value_keeps_the_outputs_of_facts_at_or_after_the_committed_offset(app: Any) -> None:
    from surveil.anomaly_detection.app import ChartValue, Outbox, Output
    from surveil.detect.patterns import Cusum

    keys = [f"PT{n:03}".encode() for n in range(20)]  # patrons, on several partitions
    for n, key in enumerate(keys):
        outputs = [Output(f"facts:{offset}", app.UNCHAINED_ALERTS, b"T001", b"alert") for offset in (n, 100 + n, 200 + n)]
        app._changed_charts[key] = ChartValue(Cusum(), Outbox({"facts": 200 + n}, outputs))
    assert len({partition_for(key, app.settings.partitions) for key in keys}) > 1
    cut = {TP(name(app, app.FACTS), p): 100 + 5 * p for p in range(app.settings.partitions)}
    app.stage_changed(assigned(app), cut)
    for n, key in enumerate(keys):
        below = 100 + 5 * partition_for(key, app.settings.partitions)
        kept = app._chart_value.decode(app.chart_table.data[key]).outbox.outputs
        assert [o.source for o in kept] == [f"facts:{offset}" for offset in (n, 100 + n, 200 + n) if offset >= below]


def test_the_offset_of_another_partition_or_topic_forgets_nothing(app: Any, floor: list[m.Event]) -> None:
    offsets: Counter[str] = Counter()
    table_id = floor[0].subject
    feed(app, floor, offsets)
    app.stage_changed(assigned(app), {})
    before = stored_table(app, table_id).outbox.outputs
    app._changed[table_id.encode()] = stored_table(app, table_id)
    partition = partition_for(table_id.encode(), app.settings.partitions)
    elsewhere = {TP(name(app, topics.TABLE), p): 10**9 for p in range(app.settings.partitions) if p != partition}
    refusals = {TP(name(app, topic), partition): 10**9 for topic in app.REFUSALS}  # keyed by device, not table
    app.stage_changed(assigned(app), {**elsewhere, **refusals, TP(name(app, topics.TABLE), partition): None})
    assert stored_table(app, table_id).outbox.outputs == before


def test_a_dead_letter_for_an_output_too_large_is_published_again_with_its_event(
    app: Any, floor: list[m.Event], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(topics, "fits", lambda key, value: False)  # every output too large
    monkeypatch.setattr(app, "settings", dataclasses.replace(app.settings, topic_prefix="room-2."))  # names, not sources
    offsets: Counter[str] = Counter()
    made = feed(app, floor, offsets)
    letters = [(at, outputs) for at, outputs in made.items() if outputs]
    assert letters and all(o.topic == app.DEADLETTER_TOPIC and o.source == f"{at[0]}:{at[1]}" for at, outputs in letters for o in outputs)
    (event_topic, offset), outputs = letters[-1]
    event = [e for e in floor if e.topic == event_topic][offset]
    key = event.subject.encode()
    assert app.watch_record(name(app, event_topic), home(app, key), offset, 0.0, key, codec.encode(event)) == outputs


def test_a_charts_dead_letter_for_an_output_too_large_is_published_again_with_its_fact(
    app: Any, floor: list[m.Event], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(topics, "fits", lambda key, value: False)  # every output too large
    fact, offset, outputs = signalling_fact(app, floor)
    (letter,) = outputs
    assert letter.topic == app.DEADLETTER_TOPIC and letter.source == f"facts:{offset}"
    assert b"over the broker's maximum record" in letter.value
    app.stage_changed(assigned(app), {TP(name(app, app.FACTS), p): offset for p in range(app.settings.partitions)})
    assert not app._changed_charts  # the next delivery reads the chart back from its stored value
    assert app.chart_record(name(app, app.FACTS), home(app, b"patron:P1"), offset, b"patron:P1", fact) == outputs


def test_each_topic_is_cut_at_its_own_committed_offset(app: Any) -> None:
    from surveil.anomaly_detection.app import Output, TableState, TableValue

    cuts = {topics.SHOE: 50, topics.TABLE: 70, topics.SETTLEMENT: 90, app.UNCHAINED_ALERTS: 30}
    sources = [f"{topic}:{cut + step}" for topic, cut in cuts.items() for step in (-1, 0, 1)]
    key = b"T001"
    value = TableValue(TableState("T001"))
    value.outbox.outputs = tuple(Output(source, topics.ALERTS, key, b"alert") for source in sources)
    app._changed[key] = value
    partition = partition_for(key, app.settings.partitions)
    committed = {TP(name(app, topic), partition): cut for topic, cut in cuts.items()}
    app.stage_changed(assigned(app), committed)
    kept = [o.source for o in stored_table(app, "T001").outbox.outputs]
    assert kept == [f"{topic}:{cut + step}" for topic, cut in cuts.items() for step in (0, 1)]


def test_a_record_not_keyed_by_what_it_belongs_to_is_a_dead_letter_and_changes_nothing(app: Any, floor: list[m.Event]) -> None:
    opened = next(e for e in floor if isinstance(e, m.RoundOpened))
    table_key = opened.subject.encode()
    for key in (b"T999", None, table_key + b" "):
        (letter,) = app.watch_record(name(app, opened.topic), home(app, table_key), 3, 0.0, key, codec.encode(opened))
        assert letter.topic == app.DEADLETTER_TOPIC and b"a record is keyed by what it belongs to" in letter.value
        assert not app._changed and not app.watch_table.data
    assert not app.watch_record(name(app, opened.topic), home(app, table_key), 3, 0.0, table_key, codec.encode(opened))
    assert table_key in app._changed  # rightly keyed, the same record is applied
    fact = app._encode(app.PatronBet("P1", opened.subject, "R1", "B1", True, 500, opened.time))
    (letter,) = app.chart_record(name(app, app.FACTS), home(app, b"patron:P1"), 8, b"patron:P2", fact)
    assert letter.topic == app.DEADLETTER_TOPIC and b"its patron or dealer" in letter.value and not app._changed_charts
    assert (
        not app.chart_record(name(app, app.FACTS), home(app, b"patron:P1"), 8, b"patron:P1", fact) and b"patron:P1" in app._changed_charts
    )


def test_a_record_read_off_its_keys_partition_is_a_dead_letter_and_leaves_its_tables_offsets_alone(app: Any, floor: list[m.Event]) -> None:
    opened = next(e for e in floor if isinstance(e, m.RoundOpened))
    key = opened.subject.encode()
    elsewhere = (home(app, key) + 1) % app.settings.partitions
    # Written far ahead on another partition, it would make the table's next events look applied.
    (letter,) = app.watch_record(name(app, opened.topic), elsewhere, 10**6, 0.0, key, codec.encode(opened))
    assert letter.topic == app.DEADLETTER_TOPIC
    assert f"read on partition {elsewhere}, not on {home(app, key)}, its key's".encode() in letter.value
    assert not app._changed and not app.watch_table.data
    assert not app.watch_record(name(app, opened.topic), home(app, key), 3, 0.0, key, codec.encode(opened))
    assert app._changed[key].outbox.applied == {opened.topic: 3}
    fact = app._encode(app.PatronBet("P1", opened.subject, "R1", "B1", True, 500, opened.time))
    off = (home(app, b"patron:P1") + 1) % app.settings.partitions
    (letter,) = app.chart_record(name(app, app.FACTS), off, 10**6, b"patron:P1", fact)
    assert letter.topic == app.DEADLETTER_TOPIC and b"its key's" in letter.value and not app._changed_charts


def test_a_refused_device_message_goes_unchained_to_its_tables_partition_and_is_chained_there_once(app: Any) -> None:
    from surveil.events import deadletter

    refusal, service = next((topic, service) for topic, service in app.REFUSALS.items() if service == "shoe-reader")

    def letter(port: int) -> bytes:
        refused = deadletter.dead_letter(
            service,
            b"{}",
            "no signature: every message of shoe/T07 must be signed",
            origin=f"tcp://10.0.0.9:{port}",
            key="T07",
            kind=deadletter.SIGNATURE,
        )
        return deadletter.encode(refused)

    # A letter's key is whatever its message came with: it comes on any partition, held by any
    # worker, and that worker's view of the table may be stale. It changes no table value.
    elsewhere = (home(app, b"T07") + 1) % app.settings.partitions
    first = letter(4000)
    (unchained,) = app.watch_record(name(app, refusal), elsewhere, 900, 0.0, b"anything", first)
    assert (unchained.topic, unchained.key) == (app.UNCHAINED_ALERTS, b"T07") and not app._changed
    assert app.watch_record(name(app, refusal), elsewhere, 900, 0.0, b"anything", first) == [unchained]  # delivered again
    (other,) = app.watch_record(name(app, refusal), elsewhere, 901, 0.0, b"T07", letter(4001))

    def back(offset: int, value: bytes) -> list[Any]:
        return app.watch_record(name(app, app.UNCHAINED_ALERTS), home(app, b"T07"), offset, 0.0, b"T07", value)

    (chained,) = back(0, unchained.value)
    assert chained.topic == topics.ALERTS and codec.decode(chained.value).data.chain
    assert back(1, unchained.value) == []  # its letter delivered twice: the same alert, chained once
    assert [o.topic for o in back(2, other.value)] == [topics.ALERTS]
    assert app._changed[b"T07"].count == 2


def test_a_pattern_alert_its_fact_sent_again_is_chained_once(app: Any, floor: list[m.Event]) -> None:
    fact, offset, outputs = signalling_fact(app, floor)
    (unchained,) = outputs
    # The chart's value written and its fact's offset not committed (a crash): the fact comes again,
    # and its alert goes back to the table a second time.
    assert app.chart_record(name(app, app.FACTS), home(app, b"patron:P1"), offset, b"patron:P1", fact) == [unchained]
    key = floor[0].subject.encode()
    copies = [
        app.watch_record(name(app, app.UNCHAINED_ALERTS), home(app, key), at_offset, 0.0, key, unchained.value) for at_offset in (0, 1)
    ]
    assert [[o.topic for o in made] for made in copies] == [[topics.ALERTS], []]
    assert app._changed[key].count == 1


def test_faust_flushes_every_output_before_a_commit_and_the_next_staging_sees_its_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The order the forgetting rests on: the staging (``before_commit``), faust's flush of its
    producer, the commit; and the offsets handed to a staging are those of the commit before it,
    gone through or not."""
    from faust.transport.drivers import aiokafka

    from surveil.anomaly_detection.transport import App, Consumer

    loop = asyncio.new_event_loop()
    try:
        test_app = App("values", broker="kafka://127.0.0.1:1", web_enabled=False, loop=loop)  # never connects
        consumer = test_app.consumer
        assert isinstance(consumer, Consumer)
        steps: list[Any] = []

        async def before_commit(assigned: set[TP], committed: dict[TP, int | None]) -> None:
            steps.append(("stage", dict(committed)))

        async def flush() -> None:
            steps.append("flush")

        async def commit(offsets: Any) -> bool:
            steps.append("commit")
            return len(steps) < 4  # the second commit does not go through

        monkeypatch.setattr(test_app, "before_commit", before_commit)
        monkeypatch.setattr(test_app.producer, "flush", flush)
        monkeypatch.setattr(aiokafka.Consumer, "_commit", lambda self, offsets: commit(offsets))
        monkeypatch.setattr(Consumer, "assignment", lambda self: {TP("t", 0)})
        consumer._committed_offset[TP("t", 0)] = 40
        for offset in (55, 70, 81):
            loop.run_until_complete(consumer._commit_offsets({TP("t", 0): offset}))
        tp = TP("t", 0)
        assert steps == [
            ("stage", {tp: 40}),
            "flush",
            "commit",
            ("stage", {tp: 55}),
            "flush",
            "commit",
            ("stage", {tp: 70}),
            "flush",
            "commit",
        ]
    finally:
        loop.close()


def test_the_worker_commits_as_often_as_its_setting_says() -> None:
    """faust commits (and the worker writes its tables) every ``COMMIT_INTERVAL_MS``: the app as
    a worker started with it builds it."""
    shown = "from surveil.anomaly_detection import app; print(app.app.conf.broker_commit_interval)"
    env = os.environ | {"COMMIT_INTERVAL_MS": "250", "ALERT_SIGNING_KEY": ""}
    answer = subprocess.run([sys.executable, "-c", shown], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert answer.stdout.split()[-1] == "0.25", answer.stderr


def test_an_event_between_a_commits_slices_goes_with_this_commit_or_the_next(app: Any) -> None:
    """A commit stages its values a slice at a time, the events going on between slices: an event
    on a table not staged yet is in the value this commit writes, one on a table staged already
    is in the next commit's; none is lost."""
    events: list[m.Event] = []
    record(Floor(tables=2, shoes=1, seed=7), events.append, lambda label: None)
    first, second = events[0].subject, next(e.subject for e in events if e.subject != events[0].subject)
    last = {table: [e for e in events if e.subject == table][-1] for table in (first, second)}
    offsets: Counter[str] = Counter()
    feed(app, [e for e in events if e not in last.values()], offsets)
    slices = app.staged(assigned(app), {}, 0.0)  # a value a slice
    assert [key for _, _, key, _ in next(slices) if not is_part(key)] == [first.encode()]  # its head, after its parts
    assert second.encode() in app._changed
    at = {table: next(iter(feed(app, [event], offsets))) for table, event in last.items()}  # (topic, offset)
    assert [key for changelog in slices for _, _, key, _ in changelog if not is_part(key)][0] == second.encode()
    topic, offset = at[second]
    assert stored_table(app, second).outbox.applied[topic] == offset  # staged after its event came
    topic, offset = at[first]
    assert stored_table(app, first).outbox.applied[topic] < offset  # staged before it came...
    assert first.encode() in app._changed and second.encode() not in app._changed
    app.stage_changed(assigned(app), {})
    assert stored_table(app, first).outbox.applied[topic] == offset  # ...and in the next commit


def test_a_commit_lets_the_events_go_on_between_its_slices(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another task (the events) runs after each value a commit stages, not only after it sent them."""
    broker = Broker()
    left_to_stage: list[int] = []
    tables = [f"T{n:03}".encode() for n in range(20)]
    for key in tables:
        app._changed[key] = app.TableValue(app.TableState(key.decode()))
    monkeypatch.setattr(type(app.app), "producer", broker)
    monkeypatch.setattr(app, "STAGING_SLICE_S", 0.0)

    async def events_going_on() -> None:
        while len(broker.records) < len(tables):
            left_to_stage.append(len(app._changed))
            await asyncio.sleep(0)

    async def commit() -> None:
        events = asyncio.ensure_future(events_going_on())
        await app._write_changed(assigned(app), {})
        await events

    asyncio.run(commit())
    assert sorted(key for _, _, key, _ in broker.records) == sorted(tables)
    assert set(range(1, len(tables))) <= set(left_to_stage)  # it ran with 19 values left to stage, 18, ... 1


def test_the_events_waiting_on_a_commit_go_on_between_its_slices_for_as_long_as_a_slice(app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between two slices of a commit's staging (10 ms each here) the waiting events (0.5 ms each)
    go on for as long as a slice, not one of them: a bare yield let one through and left the rest
    queued behind the commit."""
    handled: list[int] = [0]
    at_each_value: list[int] = []  # the events handled when each value's staging began
    committed = False

    def slow_write(*args: Any) -> bytes:
        at_each_value.append(handled[0])
        time.sleep(0.01)
        return b""

    for n in range(6):
        app._changed[f"T{n:03}".encode()] = app.TableValue(app.TableState(f"T{n:03}"))
    monkeypatch.setattr(app, "_write_table", slow_write)
    monkeypatch.setattr(app, "STAGING_SLICE_S", 0.01)

    async def events_waiting() -> None:
        while not committed:
            time.sleep(0.0005)
            handled[0] += 1
            await asyncio.sleep(0)

    async def commit() -> None:
        nonlocal committed
        events = asyncio.ensure_future(events_waiting())
        await asyncio.sleep(0)
        await app._write_changed(assigned(app), {})
        committed = True
        await events

    asyncio.run(commit())
    between = [later - earlier for earlier, later in zip(at_each_value, at_each_value[1:])]
    assert len(between) == 5 and min(between) >= 3, between  # about 20 each; a bare yield lets 1 through


def test_an_event_that_fails_between_slices_takes_its_table_out_of_the_commit(app: Any) -> None:
    """A failed event puts its table back to its last written value, whether or not a commit is
    under way (a bug's path: faust logs it and goes on)."""
    first, second = b"T001", b"T002"
    for key in (first, second):
        app._changed[key] = app.TableValue(app.TableState(key.decode()))
    slices = app.staged(assigned(app), {}, 0.0)
    assert [key for _, _, key, _ in next(slices)] == [first]
    with pytest.raises(RuntimeError), app._changing(app._changed, second, app._changed[second]):
        raise RuntimeError("a bug in an event's check")
    assert [record for changelog in slices for record in changelog] == []
    assert first in app.watch_table.data and second not in app.watch_table.data


def tracked_in(value: Any) -> list[Any]:
    """The objects of ``value`` (its fields, items, their fields...) that the cyclic garbage
    collector tracks, but for enum members: shared by every value, made once."""
    found, stack = [], [value]
    while stack:
        held = stack.pop()
        if gc.is_tracked(held) and not isinstance(held, Enum):
            found.append(held)
        if isinstance(held, msgspec.Struct):
            stack.extend(getattr(held, field) for field in held.__struct_fields__)
        elif isinstance(held, list | tuple):
            stack.extend(held)
        elif isinstance(held, dict):
            stack.extend(held.values())
    return found


def test_a_tables_state_gives_the_garbage_collector_nothing_to_walk_but_carried_bets(app: Any, floor: list[m.Event]) -> None:
    """A full collection walks every object the collector tracks, and the worker waits meanwhile:
    at 1,000 tables the detectors' rounds were more than 150,000 of them, and at 3,000 tables their
    shoes, windows and orders some 60,000 more. A table's state (its rounds, their bets, cards and
    results, its shoes, their cards and fingerprints, its orders of rounds and shoes, its outbox)
    is not tracked (none is ever part of a reference cycle), as held live or as decoded from the
    changelog; a carried bet's (spot, amount) is a tuple holding an enum member, which the
    collector keeps tracking (as it does settlements waiting for their round's end: events; none
    waits once the shoe is over)."""
    feed(app, floor, Counter())
    app.stage_changed(assigned(app), {})
    table_id = floor[0].subject.encode()
    _, live = app._written[table_id]
    for value in (live, app.stored_table(table_id)):
        # What collections have seen and found untrackable (tuples of ints and the like) is untracked;
        # a tuple of tuples the one after its items were.
        gc.collect()
        gc.collect()
        rounds = value.state.rounds.values()
        bets = [bet for watched in rounds for bet in watched.round.bets.values()]
        assert len(rounds) == RECENT_ROUNDS and len(bets) > 40
        (shoe,) = value.state.shoes.values()
        assert shoe.shoe.round_spans and shoe.winnower.selected and value.state.round_order and value.outbox.outputs
        carried = [bet.carried for bet in bets if bet.carried is not None]
        assert sorted(map(id, tracked_in(value))) == sorted(map(id, carried))


def tables_records(changelog: list[tuple[str, int, bytes, bytes | None]]) -> list[tuple[str, int, bytes, bytes | None]]:
    """The records of a commit's changelog for the tables' values (not the charts')."""
    return [record for record in changelog if "table-watch" in record[0]]


def changelog_holds(held: dict[bytes, bytes], changelog: list[tuple[str, int, bytes, bytes | None]]) -> None:
    """``changelog``'s records of the tables' changelog applied to ``held``, as a compacted topic keeps them."""
    for topic, _, key, value in changelog:
        if "table-watch" in topic:
            if value is None:
                held.pop(key, None)
            else:
                held[key] = value


def parts_held(app: Any) -> set[bytes]:
    return {key for key in app.watch_table.data if is_part(key)}


def parts_named(app: Any, key: bytes) -> set[bytes]:
    return {part_key(key, name, version) for name, version in app.stored_table(key).parts if version != CARRIED}


@contextmanager
def worker(app: Any, writer: bytes, held: dict[bytes, bytes]) -> Iterator[dict[bytes, bytes]]:
    """The app as a worker process of its own (``writer``) that holds ``held`` as its tables'
    data (what it recovered or wrote): its values cached and changed meanwhile are its own. Yields
    its data, which it changes as it writes."""
    saved = {name: getattr(app, name) for name in ("WRITER", "_written", "_changed", "_touched", "_orphans")}
    app.WRITER, app._written, app._changed, app._touched, app._orphans = writer, OrderedDict(), {}, {}, {}
    app.watch_table.data.clear()
    app.watch_table.data.update(held)
    try:
        yield app.watch_table.data
    finally:
        for name, value in saved.items():
            setattr(app, name, value)


@contextmanager
def recovered(app: Any, writer: bytes, changelog: dict[bytes, bytes]) -> Iterator[dict[bytes, bytes]]:
    """A worker (``writer``) that recovered ``changelog``: its orphans found, as after a restart."""
    with worker(app, writer, changelog) as data:
        app._unapplied_offsets(assigned(app))
        yield data


def fed_and_written(app: Any, events: list[m.Event], offsets: Counter[str]) -> dict[bytes, bytes]:
    """The events through the app with two commits, one before the last round's events and one
    after: the first head carries every part, the second stores those the round left as they
    were. What the changelog holds."""
    changelog: dict[bytes, bytes] = {}
    for some in (events[:-40], events[-40:]):
        feed(app, some, offsets)
        changelog_holds(changelog, app.stage_changed(assigned(app), {}))
    return changelog


def written_halfway(app: Any, floor: list[m.Event]) -> tuple[bytes, int, Counter[str], dict[bytes, bytes]]:
    """The first half of the floor's events through the app and ``fed_and_written``: the table's
    key, the number of events fed, the topics' next offsets, and what the changelog holds."""
    offsets: Counter[str] = Counter()
    start = len(floor) // 2
    changelog = fed_and_written(app, floor[:start], offsets)
    assert parts_held(app) == parts_named(app, floor[0].subject.encode()) != set()
    return floor[0].subject.encode(), start, offsets, changelog


def test_a_commit_writes_a_tables_head_and_only_the_parts_of_it_that_changed(app: Any, floor: list[m.Event]) -> None:
    """Written after every event of the shoe's last third, a table's value reads back as it was
    live, from its head and the parts it carries or names, and the table keeps no other part (a
    round that leaves the recent ones is deleted); a commit writes a fraction of the whole value,
    most often as the head alone."""
    offsets: Counter[str] = Counter()
    key = floor[0].subject.encode()
    start = len(floor) * 2 // 3
    feed(app, floor[:start], offsets)
    app.stage_changed(assigned(app), {})
    written, whole, records = 0, 0, Counter[int]()
    for event in floor[start:]:
        feed(app, [event], offsets)
        changelog = tables_records(app.stage_changed(assigned(app), committed_at(app, key, dict(offsets))))
        records[len(changelog)] += 1
        assert [k for _, _, k, _ in changelog if not is_part(k)] == [key]
        live = app._written[key][1]
        written += sum(len(k) + len(v or b"") for _, _, k, v in changelog)
        whole += len(app._encode(msgspec.structs.replace(live, parts=(), carried={})))  # as one value, before the parts
        assert app._encode(app.stored_table(key)) == app._encode(live)
        assert parts_held(app) == parts_named(app, key)
    assert len([e for e in floor[start:] if isinstance(e, m.RoundOpened)]) > RECENT_ROUNDS  # rounds came and went
    assert written * 4 < whole  # 2.5 MB against 12.0
    assert records[1] * 2 > sum(records.values())  # most write the head alone, carrying what changed: 305 of 417


def test_a_commit_cut_short_anywhere_leaves_each_table_as_one_commit_or_the_other_wrote_it(app: Any, floor: list[m.Event]) -> None:
    """A worker that died in the middle of a commit's writes resumes from the table's head before
    or after it, whole; the worker that recovers it writes every part of it anew the first time
    (its head carries those the earlier head named, and stores those it carried), and deletes what
    no head names (the versions written without their head, its predecessor's) once no worker can
    still be sending a head that names them."""
    key, start, offsets, changelog = written_halfway(app, floor)
    before = app._encode(app.stored_table(key).state)
    feed(app, floor[start : start + 80], offsets)  # two rounds and more: some of the earlier rounds' parts deleted
    commit = tables_records(app.stage_changed(assigned(app), {}))
    after = app._encode(app.stored_table(key).state)
    head_at = [k for _, _, k, _ in commit].index(key)
    assert 0 < head_at < len(commit) - 1  # parts before the head, tombstones after it
    for cut in range(len(commit) + 1):
        held = dict(changelog)
        changelog_holds(held, commit[:cut])
        with recovered(app, b"successor", held):
            assert app._encode(app.stored_table(key).state) == (after if cut > head_at else before)
            inherited = parts_named(app, key)
            orphans = set(app._orphans)
            assert orphans == parts_held(app) - inherited  # written without their head, or left by its tombstones
            app._changed[key] = app.stored_table(key)
            first = tables_records(app.stage_changed(assigned(app), {}))
            changelog_holds(held, first)
            rewritten = {k for _, _, k, v in first if v is not None and is_part(k)}  # those the earlier head carried
            assert rewritten == parts_named(app, key) and not rewritten & inherited  # every part anew, carried or its own
            assert {k for k in held if is_part(k)} == rewritten | inherited | orphans  # nothing deleted yet
        with recovered(app, b"successor", held):  # recovering the partition again, later
            assert set(app._orphans) == inherited | orphans
            app._orphans.update((k, (partition, 0.0)) for k, (partition, _) in app._orphans.items())  # due: time went by
            again = tables_records(app.stage_changed(assigned(app), {}))
            assert [v for *_, v in again] == [None] * len(inherited | orphans)  # tombstones, and nothing else
            assert {k for _, _, k, v in again if v is None} == inherited | orphans
            changelog_holds(held, again)
            assert {k for k in held if is_part(k)} == parts_named(app, key) and not app._orphans
            assert app._encode(app.stored_table(key).state) == (after if cut > head_at else before)


def test_a_worker_and_its_successor_writing_the_same_table_leave_its_last_head_whole(app: Any, floor: list[m.Event]) -> None:
    """A worker that lost its partitions with a commit in flight (frozen past its session timeout,
    say) writes the table after its successor recovered it, its records landing before or after
    the successor's, or some before the successor recovered and the rest after: whatever the
    order, the changelog ends with a head whose parts are all there, and a worker recovering it
    reads the table as that head's writer had it."""
    key, start, offsets, changelog = written_halfway(app, floor)
    app._changed[key] = app.stored_table(key)
    feed(app, floor[start : start + 40], Counter(offsets))  # the earlier worker goes on, in memory
    late = tables_records(app.stage_changed(assigned(app), {}))
    late_state = app._encode(app.stored_table(key).state)
    late_head = [k for _, _, k, _ in late].index(key)
    for landed in (0, late_head):  # none of its records, or its parts but not its head, before the successor recovered
        held = dict(changelog)
        changelog_holds(held, late[:landed])
        with recovered(app, b"successor", held):
            feed(app, floor[start : start + 90], Counter(offsets))
            successors = tables_records(app.stage_changed(assigned(app), {}))
            successor_state = app._encode(app.stored_table(key).state)
        for first, second, last_state in ((successors, late[landed:], late_state), (late[landed:], successors, successor_state)):
            ending = dict(held)
            changelog_holds(ending, first)
            changelog_holds(ending, second)
            with recovered(app, b"third", ending):
                assert app._encode(app.stored_table(key).state) == last_state


def test_a_tables_value_written_whole_before_the_parts_is_read_and_written_again_in_parts(app: Any, floor: list[m.Event]) -> None:
    offsets: Counter[str] = Counter()
    key = floor[0].subject.encode()
    feed(app, floor[: len(floor) // 2], offsets)
    live = app._changed.pop(key)
    whole = msgspec.msgpack.encode({field: getattr(live, field) for field in ("state", "outbox", "chain", "count", "returned")})
    app.watch_table.data[key] = whole  # as a worker from before the parts wrote it
    assert app._encode(app.stored_table(key)) == app._encode(live)
    app._changed[key] = app.stored_table(key)
    app.stage_changed(assigned(app), committed_at(app, key, dict(offsets)))
    assert not parts_held(app) and app._encode(app.stored_table(key).state) == app._encode(live.state)  # its head carries every part
    feed(app, floor[len(floor) // 2 : len(floor) // 2 + 1], offsets)
    app.stage_changed(assigned(app), committed_at(app, key, dict(offsets)))
    assert len(app.watch_table.data[key]) * 3 < len(whole) and parts_held(app) == parts_named(app, key) != set()


def test_a_part_the_changelog_lacks_makes_its_tables_events_dead_letters(app: Any, floor: list[m.Event]) -> None:
    offsets: Counter[str] = Counter()
    key = floor[0].subject.encode()
    fed_and_written(app, floor[: len(floor) // 2], offsets)
    app._written.clear()
    del app.watch_table.data[sorted(parts_held(app))[0]]
    event = floor[len(floor) // 2]
    (letter,) = app.watch_record(name(app, event.topic), home(app, key), offsets[event.topic], 0.0, key, codec.encode(event))
    assert letter.topic == app.DEADLETTER_TOPIC and b"the changelog lacks the part" in letter.value


def test_a_checkpoint_counts_each_tables_alerts_and_not_its_parts(app: Any, floor: list[m.Event]) -> None:
    from surveil.events.models import ChainHead

    fed_and_written(app, floor, Counter())
    key = floor[0].subject.encode()
    live = app._written[key][1]
    assert live.count and parts_held(app)
    app._written.clear()
    assert app.chain_heads({home(app, key)}) == {home(app, key): {key.decode(): ChainHead(live.count, live.chain)}}


@pytest.fixture(scope="module")
def alerts_of_three_streams() -> list[m.Event]:
    """A table whose shoe raises three alerts before a third of it is played: a card read against
    the table's card (raised by whichever of the two streams brings the second), a late bet (the
    table stream) and a wrong payout (settlement)."""
    events: list[m.Event] = []
    record(
        Floor(tables=1, shoes=1, seed=3, inject=parse_codes("CARD_MISMATCH,LATE_BET,PAYOUT_MISMATCH")), events.append, lambda label: None
    )
    return events


class Broker:
    """The detectors' producer as the tests see it: the records sent, in order, each acknowledged
    at once or, ``held``, when the test says; the alerts published, in order, in ``alerts``."""

    def __init__(self, held: bool = False) -> None:
        self.records: list[tuple[str, int, bytes, bytes | None]] = []
        self.alerts: list[bytes] = []
        self.deliveries: list[asyncio.Future[None]] = []
        self.held = held

    @property
    def changelog(self) -> dict[bytes, bytes]:
        """What the tables' changelog holds of the records, as a compacted topic keeps them."""
        held: dict[bytes, bytes] = {}
        changelog_holds(held, self.records)
        return held

    async def send(self, topic: str, key: bytes, value: bytes | None, partition: int, timestamp: Any, headers: Any) -> Any:
        self.records.append((topic, partition, key, value))
        delivered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self.held:
            delivered.set_result(None)
        self.deliveries.append(delivered)
        return delivered

    async def publish(self, outputs: list[Any]) -> None:
        self.alerts += [output.value for output in outputs if output.topic == topics.ALERTS]


@pytest.fixture
def broker(app: Any, monkeypatch: pytest.MonkeyPatch) -> Broker:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from surveil.runtime.alert_keys import AlertSigner

    broker = Broker()
    monkeypatch.setattr(type(app.app), "producer", broker)
    monkeypatch.setattr(app, "_publish", broker.publish)
    monkeypatch.setattr(app, "SIGNER", AlertSigner(Ed25519PrivateKey.generate()))
    return broker


def numbered(events: list[m.Event]) -> list[tuple[m.Event, int]]:
    """Each event with its offset on its topic."""
    offsets: Counter[str] = Counter()
    numbered = []
    for event in events:
        numbered.append((event, offsets[event.topic]))
        offsets[event.topic] += 1
    return numbered


async def watched(app: Any, events: list[tuple[m.Event, int]]) -> None:
    """The events through the ``watch`` agent's steps: ``watch_record``, then ``publish_chained``."""
    for event, offset in events:
        key = event.subject.encode()
        await app.publish_chained(app.watch_record(name(app, event.topic), home(app, key), offset, 0.0, key, codec.encode(event)))


def test_alerts_published_before_a_crash_come_again_the_same_whatever_order_the_streams_then_come_in(
    app: Any, broker: Broker, alerts_of_three_streams: list[m.Event]
) -> None:
    """A worker killed after publishing alerts it raised since its last commit resumes from values
    that hold them: their events, delivered again with the table stream first, the shoe stream and
    settlement after it, publish the same bytes, and the table's chain verifies across the kill.
    (Chained afresh in that order, the late bet comes before the card read it followed: the same
    ids, other chains, a break; seen in the faults test with the broker and the detectors killed.)"""
    from surveil.analysis.replay import replay
    from surveil.analysis.verify import verify

    events = numbered(alerts_of_three_streams)
    asyncio.run(watched(app, events[:100]))
    assert broker.alerts == []
    broker.records += app.stage_changed(assigned(app), {})  # the last commit, at these offsets
    committed = Counter(event.topic for event, _ in events[:100])
    asyncio.run(watched(app, events[100:250]))  # then killed
    before = {codec.decode(value).id: value for value in broker.alerts}
    assert sorted(codec.decode(value).data.rule for value in broker.alerts) == ["CARD_MISMATCH", "LATE_BET", "PAYOUT_MISMATCH"]

    with recovered(app, b"successor", broker.changelog):
        again = [(e, offset) for topic in (topics.TABLE, topics.SHOE, topics.SETTLEMENT) for e, offset in events if e.topic == topic]
        asyncio.run(watched(app, [(e, offset) for e, offset in again if offset >= committed[e.topic]]))

    after = broker.alerts[len(before) :]
    assert sorted(after) == sorted(before.values())  # each published again, byte for byte
    assert verify(broker.alerts, app.SIGNER.verifier).breaks == []
    offline = replay(iter(codec.encode(event) for event in alerts_of_three_streams)).alerts
    assert set(before) == {alert.id for alert in offline}

    with recovered(app, b"afresh", {}):  # what a successor that found none of them written makes of that order
        asyncio.run(watched(app, again))
    afresh = {codec.decode(value).id: value for value in broker.alerts[len(before) + len(after) :]}
    assert afresh.keys() == before.keys() and afresh != before


def alerts_timed() -> float:
    """How many alerts ``surveil_alert_latency_seconds`` timed, from every topic."""
    return sum(
        sample.value
        for family in REGISTRY.collect()
        if family.name == "surveil_alert_latency_seconds"
        for sample in family.samples
        if sample.name.endswith("_count")
    )


def test_an_alert_and_a_checkpoint_counting_it_wait_for_its_tables_value_in_the_changelog(
    app: Any, broker: Broker, alerts_of_three_streams: list[m.Event], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Until the broker acknowledges the table's value that chains it, its alert is not published
    and no checkpoint counts it; an agent cancelled meanwhile (a rebalance) leaves the write going
    on; a write that fails stops the worker, and nothing that write would have made durable goes
    out."""
    crashes: list[BaseException] = []

    async def crash(reason: BaseException) -> None:
        crashes.append(reason)

    monkeypatch.setattr(app.app, "crash", crash)
    events = iter(numbered(alerts_of_three_streams))
    key = alerts_of_three_streams[0].subject.encode()
    held = {home(app, key)}
    broker.held = True

    def next_alerting() -> list[Any]:
        """The events up to the next that raises an alert through the agent's steps; that one's outputs."""
        for event, offset in events:
            outputs = app.watch_record(name(app, event.topic), home(app, key), offset, 0.0, key, codec.encode(event))
            if any(output.topic == topics.ALERTS for output in outputs):
                return outputs
            asyncio.run(app.publish_chained(outputs))
        raise AssertionError("no more alerts")

    async def alert_and_checkpoint(
        outputs: list[Any], fail: BaseException | None, cancel: bool = False
    ) -> tuple[list[Any], list[Any], Any]:
        alerting = asyncio.ensure_future(app.publish_chained(outputs))
        await asyncio.sleep(0)
        heads = asyncio.ensure_future(app.chain_heads_written(held))
        for _ in range(5):
            await asyncio.sleep(0)
        waiting = [alerting.done(), heads.done(), list(broker.alerts), alerts_timed()]
        if cancel:
            alerting.cancel()
            await asyncio.sleep(0)
        for delivery in broker.deliveries:
            delivery.set_result(None) if fail is None else delivery.set_exception(fail)
        outcome = await asyncio.gather(alerting, return_exceptions=True)
        return waiting, outcome, await heads

    timed = alerts_timed()
    waiting, outcome, heads = asyncio.run(alert_and_checkpoint(next_alerting(), None))
    assert waiting == [False, False, [], timed]  # the value sent, not yet acknowledged
    (alert,) = [codec.decode(value) for value in broker.alerts]
    assert outcome == [None] and heads == {home(app, key): {key.decode(): m.ChainHead(1, alert.data.chain)}}
    assert alerts_timed() == timed + 1  # its latency, to its publication

    broker.deliveries.clear()
    waiting, outcome, heads = asyncio.run(alert_and_checkpoint(next_alerting(), None, cancel=True))
    assert waiting == [False, False, broker.alerts, timed + 1] and len(broker.alerts) == 1  # the first alert alone
    # Not published (its event, delivered again after the rebalance, publishes it from its table's
    # value), but written: the checkpoint counts it.
    assert isinstance(outcome[0], asyncio.CancelledError) and heads[home(app, key)][key.decode()].count == 2 and not crashes

    broker.alerts.clear()
    broker.deliveries.clear()
    lost = ConnectionError("the broker went away")
    timed = alerts_timed()
    waiting, outcome, heads = asyncio.run(alert_and_checkpoint(next_alerting(), lost))
    assert waiting == [False, False, [], timed] and broker.alerts == [] and alerts_timed() == timed
    assert outcome == [lost] and crashes == [lost] and heads is None
