"""Fuzzed Kafka records through each consumer's own per-record path, as the services run it: the
Kafka runner's (``KafkaRunner._apply``: verify the signature, decode, prefetch, process, dead
letters) for the table-controller and settlement, and the faust app's (``watch_record``,
``chart_record`` and ``stage_changed`` of ``surveil.anomaly_detection.app``) for the detectors.

A case is a place in a recorded floor (``fuzzing.Material``) and, among the floor's own records
there, fuzzed records: random headers (a signature or none, right, wrong, not ASCII, null; keys
of any characters), keys (none, a table's, any bytes, up to the broker's maximum) and values
(none, garbage, the malformed and absurd events of ``fuzzing.event_record``, valid events with a
field stretched to hundreds of KB, and values of any size up to the broker's maximum). A case
passes when:

- nothing escapes the path: every record gives outputs or a dead letter;
- every output fits in one record of the broker (``topics.fits``), and is a contract event or a
  dead letter; each dead letter names a record of the case, with a reason, and its payload is the
  start of that record's value (or of the output it replaces), with the whole's size and digest;
- the runner commits past every record (its offsets are each partition's last); the state it
  commits can be stored, and the faust app's changelog values fit in a record too.

The live part (records like these produced to the real broker, into the services as they run)
is ``integration/faults/test_hostile_records.py`` and ``bench/fuzz.py --live``.
"""

from __future__ import annotations

import hashlib
import json
import traceback
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from hypothesis import strategies as st
from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from faults.fuzzing import DEVICE_SECRET, STEP, WINDOW, FloorKeys, ProcessorConsumer, _copy, _near, event_record, material
from support.runners import runner_without_kafka
from surveil.events import codec, deadletter, topics
from surveil.events import models as m
from surveil.events.signing import SIGNED_TOPICS, DeviceKeys
from surveil.runtime.kafka import partition_for
from surveil.runtime.processor import Processor
from surveil.settlement.processor import SettlementProcessor
from surveil.table_controller.processor import TableController

PARTITIONS = 6
MAX = topics.MAX_RECORD_BYTES
Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Record:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers

    def __repr__(self) -> str:  # a failure names the record without a megabyte of it
        value = None if self.value is None else f"{self.value[:80]!r}... ({len(self.value):,} bytes)"
        key = None if self.key is None else f"{self.key[:40]!r} ({len(self.key):,} bytes)"
        return f"Record({self.topic}, key={key}, value={value}, headers={[(k[:20], v if v is None else v[:20]) for k, v in self.headers]})"


@dataclass(frozen=True)
class RecordCase:
    start: int  # which of the floor's places (every STEP events) the case starts at
    fuzzed: tuple[tuple[int, Record], ...]  # (position in the window, record)


# ---- strategies ---------------------------------------------------------------------------------

PATTERNS = [b"\x00", b"\xff", b"{", b'{"a":', b"x", b"\xe2\x82\xac", b"\\u0000"]


@cache
def big() -> st.SearchStrategy[bytes]:
    """Bytes of any size up to the broker's maximum: a pattern repeated, after a random start."""
    return st.builds(
        lambda head, pattern, size: (head + pattern * size)[: max(size, 0)],
        st.binary(max_size=16),
        st.sampled_from(PATTERNS),
        st.integers(0, MAX),
    )


@st.composite
def stretched(draw: st.DrawFn, raw: bytes) -> bytes:
    """A valid event with one string (an id, most likely) made up to half a megabyte long."""
    obj = json.loads(raw)
    text = draw(st.sampled_from(["a", "é", "\x00", "T", "/.."])) * draw(st.integers(100, MAX // 2))
    names = [("data", name) for name, value in obj["data"].items() if isinstance(value, str)] + [
        (None, "id"),
        (None, "subject"),
        (None, "source"),
    ]
    where, name = draw(st.sampled_from(names))
    held = obj["data"] if where else obj
    held[name] = held[name] + text if draw(st.booleans()) else text
    return json.dumps(obj).encode()


NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@cache
def internal_values(topic: str) -> st.SearchStrategy[bytes]:
    """Valid records of the detectors' own topics and of the dead letters: pattern alerts, pattern
    facts (msgpack), dead letters (of a spoofed device message, most of them)."""
    from surveil.anomaly_detection import app

    tables = st.sampled_from(material().ids["table_id"])
    if topic == app.UNCHAINED_ALERTS:
        data = st.builds(
            m.AlertRaisedData,
            table_id=tables,
            alert_id=st.text(min_size=1, max_size=20),
            rule=st.sampled_from(["PATRON_WIN_STREAK", "LATE_BET", "x"]),
            article=st.just("Art. 12"),
            severity=st.sampled_from(["info", "warning", "critical"]),
            summary=st.text(min_size=1, max_size=40),
        )
        return data.map(lambda d: codec.encode(codec.make(m.AlertRaised, d, id=f"alert:{d.alert_id}", source="fuzz", time=NOW)))
    if topic == app.FACTS:
        return st.sampled_from(AppConsumer.facts or [b"\x80"])
    letter = st.builds(
        deadletter.dead_letter,
        st.sampled_from(["table-controller", "shoe-reader", "settlement", "x"]),
        st.binary(max_size=200),
        st.text(max_size=50),
        origin=st.text(max_size=30),
        key=st.one_of(st.none(), tables, st.text(max_size=300)),
        offset=st.one_of(st.none(), st.integers(0, 2**63)),
        kind=st.sampled_from([deadletter.SIGNATURE, deadletter.SIGNATURE, deadletter.INVALID, "x"]),
    )
    return letter.map(deadletter.encode)


@cache
def value_strategy(topic: str, start: int, consumer: str) -> st.SearchStrategy[bytes | None]:
    if topic not in material().by_topic:
        valid = internal_values(topic)
        return st.one_of(
            st.none(), st.binary(max_size=300), valid, valid.flatmap(lambda raw: st.binary(max_size=4).map(raw.__add__)), big()
        )
    around = _near(consumer, topic, start)
    valid = st.sampled_from(around.valid)
    return st.one_of(
        st.none(),
        st.binary(max_size=300),
        event_record(topic, around),
        event_record(topic, around),
        event_record(topic, around),
        valid,
        valid.flatmap(stretched),
        big(),
    )


HEADER_KEYS = st.one_of(st.just("signature"), st.just("signature"), st.text(max_size=12), st.just("\ufffd\ufffd"), st.just("SIGNATURE"))


@cache
def key_strategy() -> st.SearchStrategy[bytes | None]:
    tables = [t.encode() for t in material().ids["table_id"]]
    return st.one_of(st.none(), st.sampled_from(tables), st.sampled_from(tables), st.binary(max_size=64), big())


FLOOR_KEYS = DeviceKeys(FloorKeys(DEVICE_SECRET))  # the floor's devices, as the runner checks them
OTHER_KEYS = DeviceKeys(FloorKeys("not the floor's"))  # keys no device was issued


@st.composite
def record(draw: st.DrawFn, topic: str, start: int, consumer: str) -> Record:
    key = draw(key_strategy())
    value = draw(value_strategy(topic, start, consumer))
    headers = []
    for name in draw(st.lists(HEADER_KEYS, max_size=3)):
        kind = draw(st.sampled_from(["right", "wrong", "not-ascii", "null", "junk", "big"]))
        if kind == "right":  # the signature of its device, so that the record gets to be decoded
            device = SIGNED_TOPICS.get(topic)
            table = (key or b"").decode(errors="replace")
            headers.append((name, FLOOR_KEYS.header(device(table), value or b"") if device else b"0" * 64))
        elif kind == "wrong":
            headers.append((name, OTHER_KEYS.header("console/T", value or b"")))
        elif kind == "not-ascii":
            headers.append((name, draw(st.sampled_from([b"\xff\xfe", "é".encode(), b"\xed\xa0\x80", b"\x00" * 64]))))
        elif kind == "null":
            headers.append((name, None))
        elif kind == "junk":
            headers.append((name, draw(st.binary(max_size=80))))
        else:
            headers.append((name, draw(big())[:100_000]))
    return Record(topic, key, value, tuple(headers))


@st.composite
def record_case(draw: st.DrawFn, consumer: str, topics_: tuple[str, ...], places: int) -> RecordCase:
    start = draw(st.integers(0, places - 1))
    items = draw(
        st.lists(
            st.tuples(st.integers(0, WINDOW), st.sampled_from(topics_).flatmap(lambda topic: record(topic, start, consumer))),
            min_size=1,
            max_size=4,
        )
    )
    return RecordCase(start, tuple(sorted(items, key=lambda item: item[0])))


# ---- checking what a path made ------------------------------------------------------------------


def check_outputs(outputs: list[tuple[str, bytes, bytes]], records: dict[tuple[str, int, int], Record]) -> tuple[str, str] | None:
    """Every output fits in a record and is a contract event or a dead letter naming one of
    ``records`` (by topic, partition and offset), with its reason, size and digest."""
    for topic, key, value in outputs:
        if not topics.fits(key, value):
            return "violation", f"an output of {len(key) + len(value):,} bytes to {topic}: the broker refuses it"
        if "deadletter" in topic:  # the dead letters, on whichever topic they go to
            try:
                letter = deadletter.decode(value)
            except Exception as error:  # noqa: BLE001
                return "violation", f"an unreadable dead letter: {error}"
            source = records.get((letter.topic or "", letter.partition or 0, letter.offset if letter.offset is not None else -1))
            if source is None:
                return "violation", f"a dead letter naming no record of the case: {letter.topic}:{letter.partition}:{letter.offset}"
            if not letter.reason or letter.payload_bytes is None or len(letter.payload) > letter.payload_bytes:
                return "violation", f"a dead letter without its reason or size: {letter.reason!r}"
            whole = source.value or b""
            if letter.payload_sha256 == hashlib.sha256(whole).hexdigest():
                if not whole.startswith(letter.payload) or letter.payload_bytes != len(whole):
                    return "violation", "a dead letter whose payload is not the start of its record's value"
            elif not letter.reason.startswith("its output to"):  # the letter of an output too large: its payload is the output
                return "violation", f"a dead letter whose digest is not its record's: {letter.reason[:200]}"
            continue
        if topic.endswith("-facts"):
            continue  # the detectors' own msgpack, read back by them (and fuzzed there)
        try:
            codec.decode(value)
        except codec.InvalidEventError as error:
            return "violation", f"an invalid output to {topic}: {error}"
    return None


def statuses(case: RecordCase, letters: set[tuple[str, int, int]], where: dict[int, tuple[str, int, int]]) -> list[str]:
    return ["rejected" if where[number] in letters else "accepted" for number in range(len(case.fuzzed))]


def _letters(outputs: list[tuple[str, bytes, bytes]]) -> set[tuple[str, int, int]]:
    named = set()
    for topic, _, value in outputs:
        if "deadletter" in topic:  # the dead letters, on whichever topic they go to
            letter = deadletter.decode(value)
            named.add((letter.topic or "", letter.partition or 0, letter.offset if letter.offset is not None else -1))
    return named


def home(key: bytes) -> int:
    """The partition a genuine producer writes a record keyed ``key`` to."""
    return partition_for(key, PARTITIONS)


def place(key: bytes | None) -> int:
    """The partition a hostile record is on: its key's, as a producer puts it, so that a hostile
    value rightly keyed reaches the rules; over a KiB of key, any one (murmur2, the partitioner
    of the keyed topics, takes seconds over a key of a megabyte in Python), which the detectors
    refuse unless it happens to be the key's."""
    if key is not None and len(key) <= 1024:
        return home(key)
    return zlib.crc32(key or b"") % PARTITIONS


# ---- the Kafka runner ---------------------------------------------------------------------------


def consumer_record(tp: TopicPartition, offset: int, rec: Record) -> ConsumerRecord:
    headers = list(rec.headers)
    size = sum(len(k.encode()) + len(v or b"") for k, v in headers)
    key_size, value_size = len(rec.key or b"") if rec.key is not None else -1, len(rec.value) if rec.value is not None else -1
    return ConsumerRecord(tp.topic, tp.partition, -1, offset, 0, 0, rec.key, rec.value, headers, None, key_size, value_size, size)


class RunnerConsumer:
    """A processor on the Kafka runner's own per-record path (``KafkaRunner._apply``), with its
    device keys: the floor's records signed, as the devices sign them; the fuzzed records among
    them, on the runner's topics; in one polled batch, committed to the state."""

    def __init__(self, name: str, processor: type[Processor], base: ProcessorConsumer) -> None:
        self.name, self.processor, self.base = name, processor, base
        self.topics = processor.consumes
        self.keys = FLOOR_KEYS

    def strategy(self) -> st.SearchStrategy[RecordCase]:
        return record_case(self.base.name, self.topics, len(self.base.snapshots))

    def _floor_record(self, event: m.Event) -> Record:
        value = codec.encode(event)
        device = SIGNED_TOPICS.get(event.topic)
        headers: Headers = (("signature", self.keys.header(device(event.subject), value)),) if device else ()
        return Record(event.topic, event.subject.encode(), value, headers)

    def run(self, case: RecordCase) -> tuple[list[str], tuple[str, str] | None]:
        start = case.start * STEP
        window = [e for e in self.base.base[start : start + WINDOW] if e.topic in self.topics]
        sequence: list[tuple[int | None, Record]] = []
        pending = list(enumerate(case.fuzzed))
        for position in range(max(len(window), WINDOW) + 1):
            while pending and pending[0][1][0] <= position:
                number, (_, rec) = pending.pop(0)
                sequence.append((number, rec))
            if position < len(window):
                sequence.append((None, self._floor_record(window[position])))
        runner = runner_without_kafka(self.processor(), _copy(self.base.snapshots[case.start]), self.keys, PARTITIONS)
        next_offset: Counter[TopicPartition] = Counter()
        batch: dict[TopicPartition, list[ConsumerRecord]] = {}
        records: dict[tuple[str, int, int], Record] = {}
        where: dict[int, tuple[str, int, int]] = {}
        for number, rec in sequence:
            tp = TopicPartition(rec.topic, place(rec.key))
            offset = next_offset[tp] = next_offset[tp] + 1
            batch.setdefault(tp, []).append(consumer_record(tp, offset, rec))
            records[rec.topic, tp.partition, offset] = rec
            if number is not None:
                where[number] = (rec.topic, tp.partition, offset)
        outputs: list[tuple[str, bytes, bytes]] = []
        try:
            outbox, offsets = runner._apply(batch)
            runner.state.commit(progress={f"{tp.topic}:{tp.partition}": offset for tp, offset in offsets.items()})
        except Exception:
            return statuses(case, set(), where), ("crash", f"{case.fuzzed!r}\n{traceback.format_exc(limit=-4)}")
        if offsets != {tp: next_offset[tp] for tp in batch}:
            return statuses(case, set(), where), ("violation", f"the runner would not commit past every record: {offsets}")
        for produced in outbox.values():
            outputs += produced
        problem = check_outputs(outputs, records)
        return statuses(case, _letters(outputs), where), problem


# ---- the faust app ------------------------------------------------------------------------------


@contextmanager
def _fresh_app(tables: dict[bytes, bytes], charts: dict[bytes, bytes]) -> Iterator[Any]:
    """The faust app's module, its tables holding ``tables`` and ``charts`` and nothing changed."""
    from surveil.anomaly_detection import app

    app.forget_tables()
    app.watch_table.data.update(tables)
    app.chart_table.data.update(charts)
    yield app


class AppConsumer:
    """The detectors' faust app, record by record as its agents take them (``watch_record`` for
    the shoe, table, settlement, pattern-alert and dead-letter topics, ``chart_record`` for the
    facts), what it sends to its own topics read back by it, and at the end its changed tables
    staged as a commit stages them (``stage_changed``)."""

    name = "anomaly-detection/faust app"
    facts: list[bytes] = []  # valid facts, as the floor made them

    def __init__(self) -> None:
        from faults.fuzzing import _BASES
        from surveil.anomaly_detection import app

        self.app = app
        self.watched = (topics.SHOE, topics.TABLE, topics.SETTLEMENT, app.UNCHAINED_ALERTS, *app.REFUSALS, app.FACTS)
        self.base = _BASES[self.name] = [e for e in material().recorded if e.topic in self.watched[:3]]
        # The app's own topics are read after what made their records: offsets of their own.
        self.internal: Counter[str] = Counter()
        self.assigned = {TopicPartition(app.settings.topic(t), p) for t in (*self.watched[:3], app.FACTS) for p in range(PARTITIONS)}
        self.snapshots: list[tuple[dict[bytes, bytes], dict[bytes, bytes]]] = []
        with _fresh_app({}, {}):
            for start in range(0, len(self.base), STEP):
                self.snapshots.append((dict(app.watch_table.data), dict(app.chart_table.data)))
                for offset, event in enumerate(self.base[start : start + STEP], start=start):
                    genuine = Record(event.topic, event.subject.encode(), codec.encode(event), ())
                    for topic, _, value in self._feed(genuine, home(genuine.key), offset, {}):
                        if topic == app.FACTS and len(AppConsumer.facts) < 500:
                            AppConsumer.facts.append(value)
                app.stage_changed(self.assigned, {})

    def strategy(self) -> st.SearchStrategy[RecordCase]:
        return record_case(self.name, self.watched, len(self.snapshots))

    def _feed(
        self, rec: Record, partition: int, offset: int, records: dict[tuple[str, int, int], Record]
    ) -> list[tuple[str, bytes, bytes]]:
        """The record at ``partition`` and ``offset``, then what the app sends to its own topics
        because of it (on their keys' partitions), in turn; every record read is put in
        ``records``; returns everything the app sent."""
        app, sent = self.app, []
        queue = [(rec, partition, offset)]
        while queue:
            rec, partition, offset = queue.pop(0)
            records[rec.topic, partition, offset] = rec
            if rec.topic == app.FACTS:
                outputs = app.chart_record(rec.topic, partition, offset, rec.key, rec.value)
            else:
                outputs = app.watch_record(rec.topic, partition, offset, NOW.timestamp(), rec.key, rec.value)
            for output in outputs:
                topic = app.FACTS if output.topic == "facts" else output.topic
                sent.append((topic, output.key, output.value))
                if topic in (app.FACTS, app.UNCHAINED_ALERTS):
                    self.internal[topic] += 1
                    queue.append((Record(topic, output.key, output.value, ()), home(output.key), 10**9 + self.internal[topic]))
        return sent

    def run(self, case: RecordCase) -> tuple[list[str], tuple[str, str] | None]:
        app = self.app
        start = case.start * STEP
        window = self.base[start : start + WINDOW]
        records: dict[tuple[str, int, int], Record] = {}
        where: dict[int, tuple[str, int, int]] = {}
        outputs: list[tuple[str, bytes, bytes]] = []
        pending = list(enumerate(case.fuzzed))
        offset = start + len(self.base)  # above every offset the snapshot's tables applied
        with _fresh_app(*self.snapshots[case.start]):
            try:
                for position in range(max(len(window), WINDOW) + 1):
                    arriving: list[tuple[int | None, Record, int]] = []
                    while pending and pending[0][1][0] <= position:
                        number, (_, rec) = pending.pop(0)
                        arriving.append((number, rec, place(rec.key)))
                    if position < len(window):
                        event = window[position]
                        key = event.subject.encode()
                        arriving.append((None, Record(event.topic, key, codec.encode(event), ()), home(key)))
                    for number, rec, partition in arriving:
                        offset += 1
                        if number is not None:
                            where[number] = (rec.topic, partition, offset)
                        outputs += self._feed(rec, partition, offset, records)
                changelog = app.stage_changed(self.assigned, {})
            except Exception:
                return statuses(case, set(), where), ("crash", f"{case.fuzzed!r}\n{traceback.format_exc(limit=-4)}")
        for topic, _, key, value in changelog:
            if value is not None and not topics.fits(key, value):
                return statuses(case, _letters(outputs), where), (
                    "violation",
                    f"a table's value of {len(value):,} bytes for {topic}: the worker could not write its state ({case.fuzzed!r})",
                )
        return statuses(case, _letters(outputs), where), check_outputs(outputs, records)


def consumers(bases: dict[str, Any]) -> dict[str, Any]:
    """The real-path consumers, on the floors of ``fuzzing.consumers()`` (``bases``)."""
    return {
        "table-controller/KafkaRunner": RunnerConsumer(
            "table-controller/KafkaRunner", TableController, bases["table-controller/baccarat.inputs"]
        ),
        "settlement/KafkaRunner": RunnerConsumer("settlement/KafkaRunner", SettlementProcessor, bases["settlement/baccarat.table"]),
        AppConsumer.name: AppConsumer(),
    }
