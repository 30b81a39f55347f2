"""Every consumer fed malformed input: the harness that the faults suite (``test_fuzz.py``, a few
hundred examples per consumer) and ``bench/fuzz.py`` (100,000 cases and more) share.

A consumer is fed a valid floor (a recorded simulated floor, ``Material``) and, at a random place
in it, fuzzed records (hypothesis): garbage bytes, valid events truncated or with bytes changed,
valid JSON that breaks the schema (a field dropped or of the wrong kind, an unknown field, an
unknown or borrowed type), events of another topic, valid events with absurd values (huge
amounts, unknown rounds and bets, a round completed twice, cards at impossible indices, hands of
a hundred cards, times at the ends of the calendar, a subject that is not the table) and earlier
events again. Each fuzzed record is one *case*. A case passes when:

- nothing crashes: the consumer raises nothing but its refusals (``Rejected``), what it keeps
  can be stored (msgpack, as the Kafka runner and faust store it), and what it publishes is a
  contract event;
- every input it refuses ends in the dead-letter output with its reason and its bytes (on the
  in-process bus: ``InProcessBus.dead_letters``; the shoe-reader's through its publisher);
- a refused input changes nothing: the same floor without it gives the same outputs, the same
  state and the same refusals of the floor's own events.

The consumers, as the services run them: the table-controller on ``baccarat.shoe`` and on
``baccarat.inputs`` and settlement on ``baccarat.table`` (their processors on an
``InProcessBus``, each record decoded as ``KafkaRunner`` decodes it), the detectors
(``surveil.detect.floor.FloorWatch``) on each of the three streams they watch (each table's state
stored between events as the faust app stores it), and the shoe-reader's line parser and its
``LineHandler``.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import time
import traceback
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import msgspec
import structlog
from hypothesis import strategies as st

from surveil.core.cards import CARDS
from surveil.core.money import BetResult, Spot
from surveil.core.play import Outcome
from surveil.detect import patterns
from surveil.detect.floor import FloorWatch as Detectors
from surveil.detect.watch import TableState, TableWatch
from surveil.embedded.record import record
from surveil.events import codec, deadletter, topics
from surveil.events import models as m
from surveil.events import shoe_protocol as protocol
from surveil.events.deadletter import DeadLetter
from surveil.events.shoe_protocol import BadLine, parse_line
from surveil.events.signing import DeviceKeys
from surveil.runtime.inproc import InProcessBus
from surveil.runtime.kafka import _decode as decode_record
from surveil.runtime.processor import Processor, Rejected
from surveil.runtime.state import MemoryBackend, State
from surveil.settlement.processor import SettlementProcessor
from surveil.shoe_reader.service import LineHandler
from surveil.sim.floor import Floor
from surveil.sim.table import ShoeLine, TableInput
from surveil.table_controller.processor import TableController

FLOOR = {"tables": 2, "shoes": 1, "seed": 2026}
DEVICE_SECRET = "fuzz floor"


class FloorKeys:
    """A key store holding a key for every device a fuzzed line may name, each its own (made up
    from the device's name under ``secret``: a test's stand-in for keys issued one by one)."""

    def __init__(self, secret: str) -> None:
        self.secret = secret.encode()

    def get(self, device: str) -> bytes:
        return hmac.new(self.secret, device.encode(), hashlib.sha256).digest()


WINDOW = 20  # the floor's events after the place the fuzzed records go in
STEP = 25  # places a case may start at: every STEP events of the floor
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

# ---- what a run found ---------------------------------------------------------------------------


@dataclass
class Verdict:
    """Per consumer: cases (fuzzed inputs delivered) and what became of them."""

    consumer: str
    cases: int = 0
    rejected: int = 0  # ended in the dead letters, with a reason
    accepted: int = 0  # taken as valid input
    dropped: int = 0  # shoe-reader: a resend of a line it already handled (acknowledged again)
    crashed: int = 0  # an exception the consumer does not expect, or state it cannot store
    violations: int = 0  # a refusal without its dead letter, a refusal that changed something, an invalid output
    seconds: float = 0.0
    examples: int = 0
    first_failures: list[str] = field(default_factory=list)

    def fail(self, kind: str, what: str) -> None:
        if kind == "crash":
            self.crashed += 1
        else:
            self.violations += 1
        gist = what.strip().splitlines()[-1][:160]
        if len(self.first_failures) < 10 and not any(gist in seen for seen in self.first_failures):
            self.first_failures.append(f"{kind}: {what}")

    @property
    def failed(self) -> bool:
        return bool(self.crashed or self.violations)


class Failure(AssertionError):
    """Raised in strict mode (the tests), so that hypothesis shrinks the case."""


# ---- the floor the fuzzed records go into -------------------------------------------------------


@dataclass
class Material:
    """A recorded simulated floor: each consumer's valid input, in order, and the ids in it."""

    controller_input: list[m.Event]  # shoe events and inputs, as the table-controller gets them
    recorded: list[m.Event]  # shoe, table and settlement events, in publish order
    lines: list[bytes]  # the shoes' lines (unsigned)
    ids: dict[str, list[str]]
    by_topic: dict[str, list[bytes]]  # every valid event's bytes, per topic

    def topic_events(self, *topics: str) -> list[m.Event]:
        return [e for e in self.recorded if e.topic in topics]


@cache
def material() -> Material:
    floor = Floor(**FLOOR)
    controller_input: list[m.Event] = []
    lines: list[bytes] = []
    for action in floor.actions():
        if isinstance(action, ShoeLine):
            lines.append(action.line)
            controller_input.append(parse_line(action.line, action.time).event)
        elif isinstance(action, TableInput):
            controller_input.append(action.event)
    recorded: list[m.Event] = []
    record(Floor(**FLOOR), recorded.append, lambda label: None)
    ids: dict[str, set[str]] = defaultdict(set)
    for event in [*controller_input, *recorded]:
        ids["event"].add(event.id)
        for name in ("table_id", "shoe_id", "round_id", "bet_id", "patron_id", "dealer_id"):
            value = getattr(event.data, name, None)
            if isinstance(value, str):
                ids[name].add(value)
    by_topic: dict[str, list[bytes]] = defaultdict(list)
    for event in [*controller_input, *recorded]:
        by_topic[event.topic].append(codec.encode(event))
    return Material(controller_input, recorded, lines, {k: sorted(v) for k, v in ids.items()}, dict(by_topic))


# ---- strategies ---------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
EXTREME_INTS = [0, 1, 999, 1000, 2**31, 2**53, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 10**30]


@dataclass(frozen=True)
class Near:
    """What is around a case's place in the floor: the ids of the events there (a fuzzed event
    naming the round in progress says more than one naming a random round) and the valid events
    of the fuzzed topic there."""

    ids: tuple[tuple[str, tuple[str, ...]], ...]
    valid: tuple[bytes, ...]

    def of(self, kind: str) -> tuple[str, ...]:
        return dict(self.ids).get(kind, ())


def near(events: Sequence[m.Event], topic: str) -> Near:
    ids: dict[str, set[str]] = defaultdict(set)
    for event in events:
        ids["event"].add(event.id)
        for name in ("table_id", "shoe_id", "round_id", "bet_id", "patron_id", "dealer_id"):
            value = getattr(event.data, name, None)
            if isinstance(value, str):
                ids[name].add(value)
    valid = tuple(codec.encode(e) for e in events if e.topic == topic) or tuple(material().by_topic[topic][:50])
    return Near(tuple((kind, tuple(sorted(values))) for kind, values in sorted(ids.items())), valid)


@cache
def _ids(kind: str, around: Near) -> st.SearchStrategy[str]:
    everywhere = material().ids.get(kind) or ["x"]
    local = around.of(kind)
    return st.one_of(*([st.sampled_from(local)] * 2 if local else []), st.sampled_from(everywhere), st.text(min_size=1, max_size=40))


@cache
def _money() -> st.SearchStrategy[int]:
    return st.one_of(st.integers(1, 10**6), st.sampled_from(EXTREME_INTS), st.integers(min_value=0))


@cache
def _signed() -> st.SearchStrategy[int]:
    return st.one_of(st.integers(-(10**6), 10**6), st.sampled_from([-x for x in EXTREME_INTS] + EXTREME_INTS), st.integers())


@cache
def _index() -> st.SearchStrategy[int]:
    return st.one_of(st.integers(1, 420), st.sampled_from([x for x in EXTREME_INTS if x > 0]), st.integers(min_value=1))


@cache
def _count() -> st.SearchStrategy[int]:
    return st.one_of(st.integers(0, 420), st.sampled_from(EXTREME_INTS), st.integers(min_value=0))


EXTREME_TIMES = [
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 15, 59, 59, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
]


@cache
def _time() -> st.SearchStrategy[datetime]:
    base = material().recorded[0].time
    return st.one_of(
        st.integers(-3600, 10 * 3600).map(lambda s: base + timedelta(seconds=s)),
        st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59), timezones=st.just(UTC)),
        st.sampled_from(EXTREME_TIMES),
    )


@cache
def _card() -> st.SearchStrategy[str]:
    return st.sampled_from(sorted(CARDS))


@cache
def _hand() -> st.SearchStrategy[list[m.HandCard]]:
    card = st.builds(m.HandCard, _index(), _card())
    return st.one_of(st.lists(card, max_size=4), st.lists(card, min_size=5, max_size=100))


_SPOTS = st.sampled_from(list(Spot))
_SEATS = st.sampled_from([str(n) for n in range(1, 100)] + ["standing"])
_PROFILES = st.sampled_from(["dicj", "sjm", "no-commission"])  # the models hold no other: see absurd_event
_CURRENCY = st.from_regex(r"[A-Z]{3}", fullmatch=True)
_TOTAL = st.integers(0, 9)


@cache
def _data(cls: type[m.Data], around: Near) -> st.SearchStrategy[m.Data]:
    """Schema-valid ``data`` of ``cls`` with absurd values where the schema lets them through."""
    fields: dict[str, st.SearchStrategy[Any]] = {
        "shoe_id": _ids("shoe_id", around),
        "round_id": _ids("round_id", around),
        "bet_id": _ids("bet_id", around),
        "patron_id": _ids("patron_id", around),
        "dealer_id": _ids("dealer_id", around),
        "decks": st.integers(6, 12),
        "automatic": st.booleans(),
        "index": _index(),
        "card": _card(),
        "face_up": st.booleans(),
        "cards_out": _count(),
        "round_no": _index(),
        "profile": _PROFILES,
        "demo": st.booleans(),
        "min_bet": _money(),
        "max_bet": _money(),
        "currency": _CURRENCY,
        "carried_bet_ids": st.lists(_ids("bet_id", around), max_size=8),
        "seat": _SEATS,
        "box": st.one_of(st.none(), _SEATS),
        "seats": st.one_of(st.none(), st.integers(7, 99)),
        "spot": _SPOTS,
        "amount": _money(),
        "indices": st.lists(_index(), max_size=30),
        "player": _hand(),
        "banker": _hand(),
        "player_total": _TOTAL,
        "banker_total": _TOTAL,
        "outcome": st.sampled_from(list(Outcome)),
        "player_pair": st.booleans(),
        "banker_pair": st.booleans(),
        "squeezed_by": st.one_of(st.none(), _ids("patron_id", around)),
        "reason": st.text(max_size=40),
        "result": st.sampled_from(list(BetResult)),
        "net": _signed(),
        "commission": _money(),
        "staked": _money(),
        "paid_out": _money(),
        "house_net": _signed(),
        "hand": st.sampled_from(["player", "banker"]),
    }
    kwargs = {"table_id": _ids("table_id", around)}
    for name in cls.__struct_fields__:
        if name == "table_id":
            continue
        if name == "card" and cls is m.CardPlaceInput:
            kwargs[name] = st.one_of(st.none(), _card())
        elif name == "round_id" and cls is m.CardsBurnedData:
            kwargs[name] = st.one_of(st.none(), _ids("round_id", around))
        elif name == "index" and cls is m.CutCardReachedData:
            kwargs[name] = _count()
        elif name in ("player", "banker") and cls is m.RoundVoidedData:
            placed = st.builds(m.PlacedCard, _index(), st.one_of(st.none(), _card()))
            kwargs[name] = st.one_of(st.none(), st.lists(placed, max_size=8))
        elif name in fields:
            kwargs[name] = fields[name]
    return st.builds(cls, **kwargs)


def _event_types(topic: str) -> list[type[m.Event]]:
    return [cls for cls in codec.EVENT_TYPES.values() if cls.topic == topic]


@st.composite
def absurd_event(draw: st.DrawFn, topic: str, around: Near) -> bytes:
    """A schema-valid event of ``topic`` with absurd values; sometimes its subject is another table."""
    cls = draw(st.sampled_from(_event_types(topic)))
    data = draw(_data(next(f.type for f in msgspec.structs.fields(cls) if f.name == "data"), around))
    event = codec.make(cls, data, id=draw(_ids("event", around)), source=draw(st.text(min_size=1, max_size=20)), time=NOW)
    if draw(st.integers(0, 9)) == 0:
        event = msgspec.structs.replace(event, subject=draw(_ids("table_id", around)))
    raw = _at(codec.encode(event), draw(_time()))
    if isinstance(event, m.RoundOpened) and draw(st.booleans()):  # a profile no house has, which the models refuse to hold
        obj = json.loads(raw)
        obj["data"]["profile"] = draw(st.text(min_size=1, max_size=12))
        raw = json.dumps(obj).encode()
    return raw


def _at(raw: bytes, time: datetime) -> bytes:
    """``raw`` with its time set to ``time``, which the models may refuse to hold."""
    obj = json.loads(raw)
    obj["time"] = time.isoformat().replace("+00:00", "Z")
    return json.dumps(obj).encode()


@st.composite
def truncated(draw: st.DrawFn, raw: bytes) -> bytes:
    return raw[: draw(st.integers(0, max(len(raw) - 1, 0)))]


@st.composite
def bytes_changed(draw: st.DrawFn, raw: bytes) -> bytes:
    out = bytearray(raw)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(out)))
        op = draw(st.sampled_from(["flip", "insert", "delete"]))
        if op == "insert" or not out:
            out[at:at] = draw(st.binary(min_size=1, max_size=3))
        elif op == "delete":
            del out[min(at, len(out) - 1)]
        else:
            out[min(at, len(out) - 1)] ^= 1 << draw(st.integers(0, 7))
    return bytes(out)


@st.composite
def json_changed(draw: st.DrawFn, raw: bytes) -> bytes:
    """Valid JSON that breaks the schema (or, now and then, still keeps it)."""
    obj = json.loads(raw)
    data = obj.get("data", {})
    op = draw(
        st.sampled_from(
            [
                "drop",
                "drop-data",
                "retype",
                "retype-data",
                "unknown-field",
                "unknown-type",
                "borrowed-type",
                "specversion",
                "not-an-object",
                "data-not-object",
            ]
        )
    )
    if op == "drop":
        obj.pop(draw(st.sampled_from(sorted(obj))), None)
    elif op == "drop-data" and data:
        data.pop(draw(st.sampled_from(sorted(data))), None)
    elif op == "retype":
        obj[draw(st.sampled_from(sorted(obj)))] = draw(JSON)
    elif op == "retype-data" and data:
        data[draw(st.sampled_from(sorted(data)))] = draw(JSON)
    elif op == "unknown-field":
        data[draw(st.text(min_size=1, max_size=10))] = draw(JSON)
    elif op == "unknown-type":
        obj["type"] = draw(st.one_of(st.text(max_size=30), st.just("baccarat.round.cancelled"), st.just("BACCARAT.ROUND.OPENED")))
    elif op == "borrowed-type":
        obj["type"] = draw(st.sampled_from(sorted(codec.EVENT_TYPES)))
    elif op == "specversion":
        obj["specversion"] = draw(st.sampled_from(["0.3", "1", "2.0", ""]))
    elif op == "not-an-object":
        return json.dumps(draw(JSON)).encode()
    elif op == "data-not-object":
        obj["data"] = draw(JSON)
    return json.dumps(obj, ensure_ascii=draw(st.booleans())).encode()


@st.composite
def replayed(draw: st.DrawFn, raw: bytes) -> bytes:
    """A valid event again (or early): as it was, under a new id, later, or at a time at the ends
    of the calendar."""
    event = codec.decode(raw)
    op = draw(st.sampled_from(["same", "new-id", "later", "extreme-time"]))
    if op == "new-id":
        event = msgspec.structs.replace(event, id=event.id + draw(st.text(min_size=1, max_size=6)))
    elif op == "later":
        event = msgspec.structs.replace(event, id=event.id + "/again", time=event.time + timedelta(hours=draw(st.integers(1, 10_000))))
    elif op == "extreme-time":
        return _at(codec.encode(msgspec.structs.replace(event, id=event.id + "/then")), draw(st.sampled_from(EXTREME_TIMES)))
    return codec.encode(event)


@st.composite
def tweaked(draw: st.DrawFn, raw: bytes) -> bytes:
    """A valid event with one value made absurd, of the kind the schema still allows: a number
    huge, an id another one's, a list long, a time at the end of the calendar."""
    obj = json.loads(raw)
    data = obj["data"]
    name = draw(st.sampled_from(sorted(data) + ["time"]))
    if name == "time":
        return _at(raw, draw(st.sampled_from(EXTREME_TIMES)))
    value = data[name]
    if isinstance(value, bool):
        data[name] = not value
    elif isinstance(value, int):
        data[name] = draw(
            st.one_of(st.sampled_from(EXTREME_INTS), st.integers(min_value=0), st.integers(-abs(value) - 2, 2 * abs(value) + 2))
        )
    elif isinstance(value, str):
        data[name] = draw(st.one_of(st.text(min_size=1, max_size=30), st.sampled_from(material().ids.get(name, ["x"]))))
    elif isinstance(value, list) and name in ("player", "banker"):
        cards = st.fixed_dictionaries({"index": st.one_of(_index(), st.integers(1, 420)), "card": _card()})
        data[name] = draw(st.one_of(st.lists(cards, max_size=3), st.lists(cards, min_size=50, max_size=100)))
    elif isinstance(value, list):
        data[name] = value * draw(st.integers(0, 50)) + draw(st.lists(st.one_of(st.integers(1, 2**70), st.text(min_size=1)), max_size=5))
    return json.dumps(obj).encode()


@cache
def event_record(topic: str, around: Near) -> st.SearchStrategy[bytes]:
    """One fuzzed record for a consumer of ``topic``."""
    mat = material()
    valid = st.sampled_from(around.valid)
    others = st.sampled_from([raw for name, raws in sorted(mat.by_topic.items()) if name != topic for raw in raws[::7]])
    return st.one_of(
        st.binary(max_size=300),
        valid.flatmap(truncated),
        valid.flatmap(bytes_changed),
        valid.flatmap(json_changed),
        absurd_event(topic, around),
        valid.flatmap(tweaked),
        valid.flatmap(tweaked),
        valid.flatmap(replayed),
        others,
    )


@dataclass(frozen=True)
class Case:
    start: int  # which of the floor's places (every STEP events) the case starts at
    fuzzed: tuple[tuple[int, bytes], ...]  # (position in the window, record)


_BASES: dict[str, Sequence[m.Event]] = {}  # consumer -> the floor it is fed


@st.composite
def event_case(draw: st.DrawFn, consumer: str, topic: str, places: int) -> Case:
    start = draw(st.integers(0, places - 1))
    around = _near(consumer, topic, start)
    items = draw(st.lists(st.tuples(st.integers(0, WINDOW), event_record(topic, around)), min_size=1, max_size=8))
    return Case(start, tuple(sorted(items, key=lambda item: item[0])))


@cache
def _near(consumer: str, topic: str, start: int) -> Near:
    return near(_BASES[consumer][max(0, start * STEP - 3 * STEP) : start * STEP + WINDOW + 3 * STEP], topic)


# ---- consumers of events ------------------------------------------------------------------------


class _Probe:
    """A processor that remembers which events its inner processor refused."""

    def __init__(self, inner: Processor) -> None:
        self.inner = inner
        self.name = inner.name
        self.consumes = inner.consumes
        self.refused: set[int] = set()

    def process(self, event: m.Event, state: State) -> Sequence[m.Event]:
        try:
            return self.inner.process(event, state)
        except Rejected:
            self.refused.add(id(event))
            raise


def _copy(backend: MemoryBackend) -> MemoryBackend:
    copy = MemoryBackend()
    copy.data = dict(backend.data)
    copy.hashes = defaultdict(dict, {key: dict(values) for key, values in backend.hashes.items()})
    return copy


def _decoded(service: str, topic: str, raw: bytes) -> m.Event | DeadLetter:
    """What the service's runner (``KafkaRunner``; the faust app does the same) makes of a
    record's bytes: the event, or its dead letter."""
    event = decode_record(raw, topic)
    if isinstance(event, codec.InvalidEventError):
        return deadletter.dead_letter(service, raw, str(event), origin=topic, topic=topic)
    return event


def _misrouted(event: m.Event, topic: str) -> str | None:
    """An event taken from ``topic`` whose type travels on another: the consumer cannot use it
    for what it is, so it must be refused (a dead letter), never dropped or misread."""
    if event.topic == topic:
        return None
    return f"a {event.__struct_config__.tag} on {topic} was taken without a dead letter"  # type: ignore[attr-defined]


def _outputs_valid(outputs: Sequence[m.Event]) -> str | None:
    for output in outputs:
        raw = codec.encode(output)
        try:
            codec.decode(raw)
        except codec.InvalidEventError as error:
            return f"published an invalid {output.__struct_config__.tag}: {error}: {raw[:300]!r}"  # type: ignore[attr-defined]
    return None


@dataclass
class _Run:
    outputs: list[bytes]
    refused_base: list[int]  # positions in the window of the floor's own events that were refused
    status: list[str]  # per fuzzed record: "rejected" or "accepted"
    letters: list[DeadLetter]
    state: Any
    problem: tuple[str, str] | None = None  # ("crash" | "violation", what)


class ProcessorConsumer:
    """A processor (table-controller, settlement) on an ``InProcessBus`` with a memory backend,
    fuzzed records arriving on ``topic`` among the floor's events, as ``KafkaRunner`` feeds it: a
    batch decoded (undecodable: a dead letter), prefetched, processed, committed."""

    def __init__(self, name: str, processor: Callable[[], Processor], topic: str, base: list[m.Event]) -> None:
        self.name, self.processor, self.topic, self.base = name, processor, topic, base
        _BASES[name] = base
        self.snapshots: list[MemoryBackend] = []
        bus = InProcessBus()
        bus.attach(processor())
        for start in range(0, len(base), STEP):
            bus.run()
            self.snapshots.append(_copy(bus.backend))  # type: ignore[arg-type]
            bus.publish(base[start : start + STEP])

    def strategy(self) -> st.SearchStrategy[Case]:
        return event_case(self.name, self.topic, len(self.snapshots))

    def _run(self, case: Case, skip: frozenset[int] = frozenset()) -> _Run:
        start = case.start * STEP
        window = self.base[start : start + WINDOW]
        bus = InProcessBus(_copy(self.snapshots[case.start]))
        probe = _Probe(self.processor())
        state = bus.attach(probe)
        outputs: list[m.Event] = []
        bus.tap(lambda e: outputs.append(e) if e.topic not in probe.consumes else None)
        letters: list[DeadLetter] = []
        fuzzed: dict[int, int] = {}  # id(event) -> fuzzed record number
        status = ["accepted"] * len(case.fuzzed)
        batch: list[m.Event] = []
        pending = list(enumerate(case.fuzzed))
        for position in range(len(window) + 1):
            while pending and pending[0][1][0] <= position:
                number, (_, raw) = pending.pop(0)
                if number in skip:
                    continue
                event = _decoded(probe.name, self.topic, raw)
                if isinstance(event, DeadLetter):
                    letters.append(event)
                    status[number] = "rejected"
                    continue
                fuzzed[id(event)] = number
                batch.append(event)
            if position < len(window):
                batch.append(window[position])
        run = _Run([], [], status, letters, None)
        try:
            prefetch = getattr(probe.inner, "prefetch", None)
            if prefetch is not None:
                prefetch(batch, state)
            bus.publish(batch)
            bus.run()
        except Exception:
            run.problem = ("crash", traceback.format_exc(limit=-3))
            return run
        for event in batch:
            if id(event) in probe.refused:
                if id(event) in fuzzed:
                    status[fuzzed[id(event)]] = "rejected"
                else:
                    run.refused_base.append(window.index(event))
            elif id(event) in fuzzed and _misrouted(event, self.topic):
                run.problem = ("violation", f"lost input: {_misrouted(event, self.topic)}")
                return run
        run.letters += bus.dead_letters
        run.outputs = [codec.encode(e) for e in outputs]
        backend = bus.backend
        run.state = (dict(backend.data), {k: dict(v) for k, v in backend.hashes.items() if v})  # type: ignore[attr-defined]
        invalid = _outputs_valid(outputs)
        if invalid:
            run.problem = ("violation", invalid)
        elif len(bus.dead_letters) != len(probe.refused) or not all(letter.reason for letter in run.letters):
            run.problem = ("violation", "a refusal without its dead letter and reason")
        return run

    def run(self, case: Case) -> tuple[list[str], tuple[str, str] | None]:
        first = self._run(case)
        if first.problem or "rejected" not in first.status:
            return first.status, first.problem
        without = self._run(case, frozenset(i for i, s in enumerate(first.status) if s == "rejected"))
        if without.problem:
            return first.status, without.problem
        for what in ("outputs", "state", "refused_base"):
            if getattr(first, what) != getattr(without, what):
                refused = [raw[:200] for (_, raw), s in zip(case.fuzzed, first.status) if s == "rejected"]
                return first.status, ("violation", f"refused input changed the {what}: {refused}")
        return first.status, None


_watched = msgspec.msgpack.Decoder(TableState)
_charts = msgspec.msgpack.Decoder(patterns.Cusum)
_encode = msgspec.msgpack.Encoder().encode


class DetectorConsumer:
    """The detectors (``surveil.detect.floor.FloorWatch``) fed the floor's shoe, table and settlement
    events, fuzzed records arriving on ``topic``; after each event the table's state is stored
    and read back as the faust app keeps it (msgpack), and at the end the input ends (``flush``).
    Undecodable records, and events of another topic, are the app's dead letters."""

    name_prefix = "anomaly-detection"

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.name = f"{self.name_prefix}/{topic}"
        self.base = _BASES[self.name] = material().topic_events(topics.SHOE, topics.TABLE, topics.SETTLEMENT)
        self.snapshots: list[tuple[dict[str, bytes], dict[str, bytes], frozenset[str]]] = []
        detectors = Detectors()
        for start in range(0, len(self.base), STEP):
            self.snapshots.append(self._snapshot(detectors))
            for event in self.base[start : start + STEP]:
                detectors.feed(event)

    @staticmethod
    def _snapshot(detectors: Detectors) -> tuple[dict[str, bytes], dict[str, bytes], frozenset[str]]:
        return (
            {t: _encode(w.state) for t, w in detectors.tables.items()},
            {k: _encode(c) for k, c in detectors.charts.items()},
            frozenset(detectors.raised_ids),
        )

    def strategy(self) -> st.SearchStrategy[Case]:
        return event_case(self.name, self.topic, len(self.snapshots))

    def run(self, case: Case) -> tuple[list[str], tuple[str, str] | None]:
        tables, charts, raised = self.snapshots[case.start]
        detectors = Detectors()
        detectors.tables = {t: TableWatch(_watched.decode(raw)) for t, raw in tables.items()}
        detectors.charts = {k: _charts.decode(raw) for k, raw in charts.items()}
        detectors.raised_ids = set(raised)
        start = case.start * STEP
        window = self.base[start : start + WINDOW]
        status = ["accepted"] * len(case.fuzzed)
        pending = list(enumerate(case.fuzzed))
        alerts: list[m.AlertRaised] = []
        try:
            for position in range(len(window) + 1):
                arriving: list[m.Event] = []
                while pending and pending[0][1][0] <= position:
                    number, (_, raw) = pending.pop(0)
                    event = _decoded(self.name_prefix, self.topic, raw)
                    if isinstance(event, DeadLetter):
                        status[number] = "rejected"
                        if not event.reason:
                            return status, ("violation", "a dead letter without a reason")
                        continue
                    if _misrouted(event, self.topic):
                        return status, ("violation", f"misread input: {_misrouted(event, self.topic)} and read as one")
                    arriving.append(event)
                if position < len(window):
                    arriving.append(window[position])
                for event in arriving:
                    alerts += detectors.feed(event)
                    watch = detectors.tables[event.subject]
                    watch.state = _watched.decode(_encode(watch.state))  # stored and read back, as live
                    for key, chart in detectors.charts.items():
                        detectors.charts[key] = _charts.decode(_encode(chart))
            alerts += detectors.flush()
        except Exception:
            return status, ("crash", traceback.format_exc(limit=-3))
        invalid = _outputs_valid(alerts)
        return status, (("violation", invalid) if invalid else None)


# ---- the shoe-reader ----------------------------------------------------------------------------

_TOKEN = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)
_NUMBERS = st.one_of(st.integers(0, 1000).map(str), st.sampled_from([str(x) for x in EXTREME_INTS] + ["-1", "007", "+5", "1e3", "0x10"]))


@st.composite
def composed_line(draw: st.DrawFn, keys: DeviceKeys | None) -> bytes:
    """A line with a right checksum whose fields are drawn from valid and invalid values, signed
    with the shoe's key, with another key, or not at all."""
    tables = material().ids["table_id"]
    kind = draw(st.one_of(st.sampled_from(["START", "CARD", "CUT", "END"]), _TOKEN))
    arguments = {
        "START": [st.one_of(st.integers(5, 13).map(str), _NUMBERS), st.sampled_from(["manual", "automatic", "auto", "MANUAL"])],
        "CARD": [_NUMBERS, st.one_of(_card(), _TOKEN), st.sampled_from(["down", "up", "sideways"])],
        "CUT": [_NUMBERS],
        "END": [_NUMBERS],
    }.get(kind, [_TOKEN])
    fields = [
        draw(st.one_of(st.just("SHOE1"), st.just("SHOE1"), st.sampled_from(["SHOE2", "shoe1", ""]))),
        table := draw(st.one_of(st.sampled_from(tables), _TOKEN)),
        draw(st.one_of(st.integers(1, 10_000).map(str), _NUMBERS)),
        draw(
            st.one_of(
                st.just("-"),
                st.just("2026-11-29T11:00:05.120Z"),
                st.from_regex(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z", fullmatch=True),
                _TOKEN,
            )
        ),
        kind,
        draw(st.one_of(st.sampled_from(material().ids["shoe_id"]), _TOKEN)),
        *(draw(argument) for argument in arguments),
    ]
    if draw(st.integers(0, 5)) == 0:  # a field too many or too few
        fields = fields[:-1] if draw(st.booleans()) else [*fields, draw(_TOKEN)]
    body = " ".join(fields)
    if draw(st.integers(0, 9)) == 0:
        body = body.replace(" ", "  ", 1)
    signing = draw(st.sampled_from(["shoe", "shoe", "other", "none", "junk"]))
    if signing == "shoe" and keys is not None:
        body += " ~" + keys.sign(f"shoe/{table}", body.encode("ascii", "replace"))
    elif signing == "other":
        body += " ~" + DeviceKeys(FloorKeys("not the floor's")).sign(f"shoe/{table}", body.encode("ascii", "replace"))
    elif signing == "junk":
        body += " ~" + draw(_TOKEN)
    raw = body.encode("ascii", "replace")
    return raw + b" *" + protocol.checksum(raw).encode() + draw(st.sampled_from([b"\n", b"\r\n", b""]))


@cache
def shoe_line(keys: DeviceKeys | None) -> st.SearchStrategy[bytes]:
    lines = material().lines
    signed = [protocol.signed_line(line, keys) for line in lines] if keys else lines
    valid = st.sampled_from(signed)
    return st.one_of(
        st.binary(max_size=300),
        valid.flatmap(truncated),
        valid.flatmap(bytes_changed),
        composed_line(keys),
        composed_line(keys),
        valid,
    )


@dataclass(frozen=True)
class LineCase:
    signed: bool
    lead: int  # the floor's lines the reader handled first
    lines: tuple[bytes, ...]


@cache
def line_case() -> st.SearchStrategy[LineCase]:
    keys = DeviceKeys(FloorKeys(DEVICE_SECRET))
    lines = material().lines
    return st.booleans().flatmap(
        lambda signed: st.builds(
            LineCase,
            st.just(signed),
            st.integers(0, len(lines)),
            st.lists(shoe_line(keys if signed else None), min_size=1, max_size=8).map(tuple),
        )
    )


class ParserConsumer:
    """``parse_line``: each line is an event that is a contract event, or ``BadLine`` with its
    reason; nothing else."""

    name = "shoe-reader/parse_line"

    def strategy(self) -> st.SearchStrategy[LineCase]:
        return line_case()

    def run(self, case: LineCase) -> tuple[list[str], tuple[str, str] | None]:
        keys = DeviceKeys(FloorKeys(DEVICE_SECRET)) if case.signed else None
        status = []
        for raw in case.lines:
            try:
                parsed = parse_line(raw, NOW, keys)
            except BadLine as error:
                status.append("rejected")
                if not error.reason or error.problem not in protocol.Problem:
                    return status, ("violation", f"BadLine without a reason: {raw!r}")
                continue
            except Exception:
                return status, ("crash", f"{raw!r}\n{traceback.format_exc(limit=-3)}")
            status.append("accepted")
            invalid = _outputs_valid([parsed.event])
            if invalid:
                return status, ("violation", invalid)
        return status, None


class _Future:
    def add_callback(self, callback: Callable[[Any], None]) -> _Future:
        callback(None)  # the broker has it at once
        return self

    def add_errback(self, errback: Callable[[Exception], None]) -> _Future:
        return self


class _Publisher:
    def __init__(self) -> None:
        self.events: list[m.Event] = []
        self.letters: list[tuple[str, bytes, bytes]] = []

    def publish(self, event: m.Event) -> _Future:
        self.events.append(event)
        return _Future()

    def publish_raw(self, topic: str, key: bytes, value: bytes) -> _Future:
        self.letters.append((topic, key, value))
        return _Future()


@cache
def _sequences() -> list[dict[str, int]]:
    """After each of the floor's lines, the last sequence number of each table."""
    last: dict[str, int] = {}
    after = [dict(last)]
    for line in material().lines:
        parsed = parse_line(line, NOW)
        last[parsed.table_id] = parsed.seq
        after.append(dict(last))
    return after


def _last_sequences(lead: int) -> dict[str, int]:
    return dict(_sequences()[lead])


class HandlerConsumer:
    """``LineHandler``, the shoe-reader's handling of each line, on a publisher that the broker
    acknowledges at once: each line is published (as its event), dead-lettered with its reason
    and bytes, or dropped as a resend of a line already handled (and acknowledged again)."""

    name = "shoe-reader/LineHandler"

    def __init__(self) -> None:
        self.keys = DeviceKeys(FloorKeys(DEVICE_SECRET))

    def strategy(self) -> st.SearchStrategy[LineCase]:
        return line_case()

    def run(self, case: LineCase) -> tuple[list[str], tuple[str, str] | None]:
        keys = self.keys if case.signed else None
        publisher = _Publisher()
        failures: list[Exception] = []
        # The floor's first ``lead`` lines were handled before (by this reader or the one before it).
        handler = LineHandler(publisher, _last_sequences(case.lead), failures.append, keys)  # type: ignore[arg-type]
        status = []
        for raw in case.lines:
            acks: list[tuple[str, int]] = []
            events, letters, expected = len(publisher.events), len(publisher.letters), dict(handler.next_seq)
            try:
                handled = handler.handle(raw, "fuzz", lambda table, seq, acks=acks: acks.append((table, seq)))
            except Exception:
                return status, ("crash", f"{raw!r}\n{traceback.format_exc(limit=-3)}")
            published, refused = len(publisher.events) - events, len(publisher.letters) - letters
            if (published, refused) == (1, 0):
                status.append("accepted")
                invalid = _outputs_valid(publisher.events[-1:])
                if invalid:
                    return status, ("violation", invalid)
            elif (published, refused) == (0, 1):
                status.append("rejected")
                topic, _, value = publisher.letters[-1]
                letter = deadletter.decode(value)
                if topic != topics.deadletter_topic("shoe-reader") or letter.payload != raw or not letter.reason:
                    return status, ("violation", f"a refused line without its dead letter: {raw!r}")
            elif (published, refused) == (0, 0) and handled is not None and handled[1] < expected.get(handled[0], 0):
                status.append("dropped")
            else:
                return status, ("violation", f"line {raw!r}: {published} events, {refused} dead letters, handled as {handled}")
            if handled is not None and acks != [handled]:
                return status, ("violation", f"line {raw!r} handled as {handled} but acknowledged {acks}")
            if handled is None and acks:
                return status, ("violation", f"line {raw!r} acknowledged {acks} though it names no trusted table")
        return status, None


# ---- the consumers, and running them ----------------------------------------------------------


@cache
def consumers() -> dict[str, Any]:
    from faults import record_fuzzing  # Kafka records through each service's own per-record path

    mat = material()
    found = {
        "table-controller/baccarat.shoe": ProcessorConsumer(
            "table-controller/baccarat.shoe", TableController, topics.SHOE, mat.controller_input
        ),
        "table-controller/baccarat.inputs": ProcessorConsumer(
            "table-controller/baccarat.inputs", TableController, topics.INPUTS, mat.controller_input
        ),
        "settlement/baccarat.table": ProcessorConsumer(
            "settlement/baccarat.table", SettlementProcessor, topics.TABLE, mat.topic_events(topics.TABLE)
        ),
        "anomaly-detection/baccarat.shoe": DetectorConsumer(topics.SHOE),
        "anomaly-detection/baccarat.table": DetectorConsumer(topics.TABLE),
        "anomaly-detection/baccarat.settlement": DetectorConsumer(topics.SETTLEMENT),
        "shoe-reader/parse_line": ParserConsumer(),
        "shoe-reader/LineHandler": HandlerConsumer(),
    }
    return found | record_fuzzing.consumers(found)


def check(consumer: Any, case: Any, verdict: Verdict, strict: bool) -> None:
    """Run one example (one or more cases) and count what became of each fuzzed record."""
    status, problem = consumer.run(case)
    fuzzed = len(case.lines) if isinstance(case, LineCase) else len(case.fuzzed)
    verdict.examples += 1
    verdict.cases += fuzzed
    verdict.rejected += status.count("rejected")
    verdict.accepted += status.count("accepted")
    verdict.dropped += status.count("dropped")
    if problem is not None:
        kind, what = problem
        verdict.fail(kind, what)
        if strict:
            raise Failure(f"{consumer.name}: {kind}: {what}")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The shoe-reader logs every line it refuses: not a hundred thousand times here."""
    before = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    try:
        yield
    finally:
        structlog.configure(**before)


def fuzz(
    consumer: Any, cases: int, seed: int = 0, chunk: int = 2000, progress: Callable[[Verdict], None] = lambda verdict: None
) -> Verdict:
    """At least ``cases`` fuzzed records into ``consumer`` (hypothesis examples of one to a few
    records each, in rounds of at most ``chunk`` examples, each round with its own seed, each
    round's end reported to ``progress``); every failure counted, none stops the run."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as with_seed

    verdict = Verdict(consumer.name)
    started = time.perf_counter()
    round_no = 0
    while verdict.cases < cases:
        before = verdict.cases
        examples = max(1, min(chunk, (cases - verdict.cases) // 3 + 1))

        @with_seed(seed * 1_000_003 + round_no)
        @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(consumer.strategy())
        def one(case: Any) -> None:
            check(consumer, case, verdict, strict=False)

        with quiet():
            one()
        round_no += 1
        progress(verdict)
        if verdict.cases == before:
            break
    verdict.seconds = time.perf_counter() - started
    return verdict


def iter_consumers(names: Sequence[str] = ()) -> Iterator[Any]:
    for name, consumer in consumers().items():
        if not names or any(n in name for n in names):
            yield consumer
