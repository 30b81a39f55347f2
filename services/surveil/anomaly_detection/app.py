"""The live anomaly-detection service: the detectors of ``surveil.detect`` on faust-streaming.

- ``watch`` consumes the co-partitioned ``baccarat.shoe``, ``baccarat.table`` and
  ``baccarat.settlement`` topics (all keyed by table id, one partition count), keeps each table's
  ``TableState`` in the ``table-watch`` table (changelog-backed: a restarted or rebalanced worker
  resumes from it), publishes alerts to ``baccarat.alerts`` and the pattern facts, keyed by
  patron or dealer, to an internal topic;
- ``chart`` consumes those facts, keeps each patron's and dealer's CUSUM chart in the
  ``pattern-charts`` table, and sends its alerts back to the table's ``watch`` (an internal
  topic keyed by table), which links every alert of the table into one hash chain;
- a device message refused for its signature comes on the dead-letter topic of the service that
  refused it, on any partition: its alert goes back to the table's ``watch`` the same way, to be
  chained by the worker that holds the table.

Both agents run exactly the code the offline replay runs, so live and offline alerts agree.

Every alert is signed with the detectors' key (``ALERT_SIGNING_KEY``; the service does not start
without it), and every ``ALERT_CHECKPOINT_SECONDS`` (60) each worker publishes, for each
partition it holds, a signed checkpoint of its tables' chains onto that partition of the alerts
topic (``detect.alerts``; ``surveil verify`` checks a log against them).

Delivery is at least once (faust commits offsets after flushing what it produced), and the
tables make it effectively once. Each table's value holds its state, the offset of the last event
applied per input topic, and the outputs of its events at or after the committed offsets
(``Outbox.forget``); in the changelog it is a head, carrying the parts of its state that changed
last, and the other parts the head names (``parts.py``), and a head is written after its parts.
An event at or below the applied offset is a redelivery after a restart: it is not applied again,
its outputs are published again (they may have been lost with the worker). So no alert is lost
and no event counts twice; a republished alert carries the same deterministic id, which is how
consumers tell it from a new one. An alert is published only once the value that chains it is in
the changelog (``publish_chained``): chained afresh after a restart, in whatever order the
streams then come, it would follow another alert of its table, and break the table's chain.

A table's value is written once per offset commit, not once per event, and only the parts of it
that changed: a value is tens of KB, and the changelog producer was the largest cost of an
event. The consumer awaits ``_write_changed`` before each commit, and it returns once the broker
has acknowledged every value the committed events changed, so a restarted worker never resumes
past what its tables hold. (faust's ``exactly_once`` mode was tried and rejected: after a kill -9 its tables came back
without updates whose offsets it had committed, and it raised alerts an uninterrupted run did
not.)
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import tempfile
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Set
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import faust
import msgspec
import structlog
from faust.types import TP

from ..detect import patterns
from ..detect.alerts import chained, checkpoints, raise_alert
from ..detect.devices import ARTICLES, signature_finding
from ..detect.floor import chart_finding
from ..detect.watch import DealerRound, Fact, PatronBet, TableState, TableWatch
from ..events import codec, deadletter, topics
from ..events.models import AlertRaised, ChainHead, Event
from ..runtime import logs
from ..runtime.alert_keys import AlertSigner
from ..runtime.config import Settings
from ..runtime.kafka import partition_for
from . import metrics
from .parts import CARRIED, ROUND, is_part, joined, part_key, split, table_of
from .transport import App

SERVICE = "anomaly-detection"
# Outputs kept per table or chart, at most. Those of events after the committed offsets are far
# fewer (up to two commit intervals'), unless commits stall: then this bound keeps a value from
# growing without end, and it is the one way an output a redelivery needs can be dropped
# (surveil_detection_outputs_dropped_total, and the SurveilDetectorsOutputsDropped alert).
RECENT_OUTPUTS = 256
# The ids of a table's last alerts that came back to it unchained (``TableValue.returned``): one
# delivered again, after a crash, by the chart or the letter that raised it, is chained once. Such
# alerts are few a table; a copy that comes after 128 others of its table (a flood of spoofed
# messages for it, during a restart) is linked again, and consumers keep the first of an id.
RETURNED_ALERTS = 128

settings = Settings.from_env(SERVICE)
log = structlog.get_logger().bind(service=SERVICE)
SIGNER = AlertSigner.from_env()  # the detectors' key; service.main refuses to start without it
CHECKPOINT_SECONDS = float(os.environ.get("ALERT_CHECKPOINT_SECONDS", "60"))


class Output(msgspec.Struct, array_like=True, gc=False):  # gc=False, tuples: a table's state (core/table.py)
    """Something an input event produced: where it went, and the bytes."""

    source: str  # "topic:offset" of the input event
    topic: str
    key: bytes
    value: bytes


class Outbox(msgspec.Struct, gc=False):  # gc=False, tuples: a table's or a chart's state (core/table.py)
    """Offsets applied per input topic and the outputs of the events a restart may deliver again:
    what makes a redelivered event harmless."""

    applied: dict[str, int] = {}
    outputs: tuple[Output, ...] = ()

    def seen(self, topic: str, offset: int) -> bool:
        return offset <= self.applied.get(topic, -1)

    def record(self, topic: str, offset: int, outputs: list[Output]) -> None:
        self.applied[topic] = offset
        kept = (*self.outputs, *outputs)
        if len(kept) > RECENT_OUTPUTS:
            metrics.OUTPUTS_DROPPED.inc(len(kept) - RECENT_OUTPUTS)
            kept = kept[-RECENT_OUTPUTS:]
        self.outputs = kept

    def of(self, topic: str, offset: int) -> list[Output]:
        source = f"{topic}:{offset}"
        return [o for o in self.outputs if o.source == source]

    def forget(self, committed: Mapping[str, int]) -> None:
        """Drops the outputs of events below their topic's committed offset (``committed``, of the
        partition the value's key is on: the offset faust last committed, or tried to, or read from
        the broker). faust flushes its producer, every output sent, before it commits an offset, so
        those outputs reached the broker and need no publishing again, whether or not the commit
        went through. Kept, they would be half a table's value by mid-shoe."""
        if committed and self.outputs:
            self.outputs = tuple(o for o in self.outputs if not _committed(o.source, committed))


def _committed(source: str, committed: Mapping[str, int]) -> bool:
    """Whether the event ``source`` names ("topic:offset") is below its topic's committed offset."""
    topic, _, offset = source.rpartition(":")
    return int(offset) < committed.get(topic, 0)


class TableValue(msgspec.Struct, gc=False):  # gc=False, tuples: a table's state (core/table.py)
    """The ``table-watch`` table's value per table (MessagePack; its field names are the encoding).
    Written, it is the head of its state's parts (``parts.py``): its state without them, the
    parts' names and versions, and the parts it carries; a value written before the parts holds
    its whole state."""

    state: TableState
    outbox: Outbox = msgspec.field(default_factory=Outbox)
    chain: str = ""  # the chain value of the table's last alert
    count: int = 0  # the table's alerts so far
    returned: tuple[str, ...] = ()  # the ids of its last RETURNED_ALERTS alerts that came back unchained
    parts: tuple[tuple[bytes, bytes], ...] = ()  # the parts of its state as last written, (name, version)
    carried: dict[bytes, bytes] = {}  # the encoded parts whose version is CARRIED, by name

    def first_return(self, alert_id: str) -> bool:
        """Whether this alert came back unchained for the first time (else it is a copy); it joins
        the table's returned alerts."""
        if alert_id in self.returned:
            return False
        self.returned = (*self.returned[1 - RETURNED_ALERTS :], alert_id)
        return True


class TableHead(msgspec.Struct):
    """The part of a ``TableValue`` a checkpoint needs: decoded without the rest."""

    chain: str = ""
    count: int = 0


class TableProgress(msgspec.Struct):
    """The part of a ``TableValue`` that says how far the table got, and the parts it is made of:
    decoded without its state."""

    outbox: Outbox = msgspec.field(default_factory=Outbox)
    parts: tuple[tuple[bytes, bytes], ...] = ()


class ChartValue(msgspec.Struct, gc=False):  # gc=False: a chart's state (core/table.py)
    """What the ``pattern-charts`` table keeps per patron or dealer."""

    chart: patterns.Cusum
    outbox: Outbox = msgspec.field(default_factory=Outbox)


app = App(
    settings.topic(SERVICE),
    datadir=os.environ.get("FAUST_DATADIR", os.path.join(tempfile.gettempdir(), "surveil-faust")),
    broker=f"kafka://{settings.kafka_bootstrap}",
    broker_credentials=settings.faust_credentials(),  # this service's principal (docs/security.md)
    broker_client_id=f"{SERVICE}-{settings.instance_id}",  # which instance owns what, in the group's description
    store="memory://",
    topic_partitions=settings.partitions,
    topic_allow_declare=True,
    consumer_auto_offset_reset="earliest",
    key_serializer="raw",
    value_serializer="raw",
    web_enabled=False,
    producer_acks=-1,
    producer_max_request_size=topics.MAX_RECORD_BYTES,
    # A commit's changelog in a few requests: aiokafka has one request in flight to a broker, with
    # one batch a partition, and a table's value over the 16 KB default was a request of its own.
    producer_max_batch_size=topics.MAX_RECORD_BYTES,
    broker_session_timeout=10.0,  # a killed worker's partitions move on after 10 s, not 60
    broker_heartbeat_interval=3.0,
    broker_commit_interval=settings.commit_interval_ms / 1000,  # what a crash can make it read and publish again
    logging_config=logs.logging_config(SERVICE, settings.log_level),  # faust's, aiokafka's lines as JSON, as ours
)

alerts_topic = app.topic(settings.topic(topics.ALERTS), key_type=bytes, value_type=bytes)
DEADLETTER_TOPIC = topics.deadletter_topic(SERVICE)
deadletters_topic = app.topic(settings.topic(DEADLETTER_TOPIC), key_type=bytes, value_type=bytes)
FACTS = f"{SERVICE}-facts"
facts_topic = app.topic(settings.topic(FACTS), key_type=bytes, value_type=bytes, partitions=settings.partitions, internal=True)
# Alerts raised away from their table's watch (the charts', the refused device messages') go back
# to it, on the table's partition: the worker that holds the table chains every alert of it in order.
# The topic keeps the name it had when it carried the charts' alerts only: renamed, it would lose
# the alerts in flight at an upgrade.
UNCHAINED_ALERTS = f"{SERVICE}-pattern-alerts"
unchained_alerts_topic = app.topic(
    settings.topic(UNCHAINED_ALERTS), key_type=bytes, value_type=bytes, partitions=settings.partitions, internal=True
)
# The dead letters of the services that check device signatures too, each service's own topic: a
# device message refused for its signature is an alert for its table.
REFUSALS = {topics.deadletter_topic(service): service for service in ARTICLES}
WATCHED = (topics.SHOE, topics.TABLE, topics.SETTLEMENT, UNCHAINED_ALERTS, *REFUSALS)
streams = app.topic(*(settings.topic(name) for name in WATCHED), key_type=bytes, value_type=bytes)
TOPICS = {topics.ALERTS: alerts_topic, DEADLETTER_TOPIC: deadletters_topic, "facts": facts_topic, UNCHAINED_ALERTS: unchained_alerts_topic}
# What each record's value is (events/topics.py): the unchained alerts are events, the facts and the
# tables' values this service's own MessagePack. Each send gets a list of its own (faust may add
# to the one it is given).
MSGPACK_HEADERS = ((topics.CONTENT_TYPE, topics.MSGPACK),)
HEADERS = {
    topics.ALERTS: tuple(topics.headers(topics.ALERTS)),
    DEADLETTER_TOPIC: tuple(topics.headers(DEADLETTER_TOPIC)),
    "facts": MSGPACK_HEADERS,
    UNCHAINED_ALERTS: tuple(topics.headers(topics.ALERTS)),
}

watch_table = app.Table("table-watch", default=None, key_type=bytes, value_type=bytes, partitions=settings.partitions)
chart_table = app.Table("pattern-charts", default=None, key_type=bytes, value_type=bytes, partitions=settings.partitions)

_table_value = msgspec.msgpack.Decoder(TableValue)
_table_progress = msgspec.msgpack.Decoder(TableProgress)
_table_head = msgspec.msgpack.Decoder(TableHead)
# The tables and charts changed and not yet staged by a commit (``staged``), written by the next.
_changed: dict[bytes, TableValue] = {}
# Of each table changed, the rounds its events since touched (``TableWatch.touched``): the others
# are as this worker last wrote them, and the commit names their written versions again without
# encoding them. A table changed otherwise (an alert back to its chain) has every part compared.
_touched: dict[bytes, set[str]] = {}
_changed_charts: dict[bytes, ChartValue] = {}
# The TableValue this worker last wrote per table, with the value it wrote: decoding a table's
# value (its head and parts, some 0.2 ms by a third of a shoe) would be the largest cost of an
# event, and the value read back is, but for a restore or a rebalance, the one this worker wrote.
# At most WATCH_CACHE_TABLES tables (the least recently written out), some 80 KB each as Python
# objects by a third of a shoe. Fewer than the tables a worker holds, and every table not written
# in its last few commits is decoded again (surveil_detection_tables_decoded_total).
WATCH_CACHE_TABLES = int(os.environ.get("WATCH_CACHE_TABLES", "4000"))
_written: OrderedDict[bytes, tuple[bytes, TableValue]] = OrderedDict()
# Versions of parts a recovered changelog holds that no head names (a commit cut short, a table's
# earlier writer's), with their partition and when a commit may delete them: once no worker can
# still be sending the head that names them, a producer's request timeout after they were found.
_orphans: dict[bytes, tuple[int, float]] = {}
# This worker process, in the versions of the parts it writes (``parts.py``), and its writes
# (each commit's, and each of tables whose chains grew: ``_write_chained``).
WRITER = os.urandom(6).hex().encode()
_writes = itertools.count(1)
# The writes of tables whose chains grew under way, each done with what failed (None: nothing):
# a checkpoint that counts their alerts is sent after them.
_chains_in_flight: set[asyncio.Future[Exception | None]] = set()
# The alerts chained and not yet published (the topic of the event that raised each, and its
# time): timed once published (surveil_alert_latency_seconds), their tables' values written first.
_chained_alerts: list[tuple[str, float]] = []
_chart_value = msgspec.msgpack.Decoder(ChartValue)
_facts = msgspec.msgpack.Decoder(PatronBet | DealerRound)
_encode = msgspec.msgpack.Encoder().encode
# A commit encodes every table and chart changed since the last (about 50 µs a value; at 3,000
# tables over a thousand change in a second): in slices this long, each followed by as long for
# the events, so an event waits for a slice, not for the whole commit's encoding. (A bare yield
# let one event through a slice: the rest queued behind the commit.)
STAGING_SLICE_S = 0.005


def forget_tables() -> None:
    """Every table and chart this process holds, has cached or has changed, forgotten: a worker
    before it recovered anything (where the tests and benchmarks start from)."""
    for held in (_changed, _changed_charts, _touched, _written, _orphans, _chained_alerts, watch_table.data, chart_table.data):
        held.clear()


def _alert_outputs(source: str, alerts: list[AlertRaised], watched: TableValue, topic: str) -> list[Output]:
    """The table's alerts, linked into its chain, as outputs (of the input event ``source``, read
    from ``topic``)."""
    outputs = []
    for alert in alerts:
        linked = chained(alert, watched.chain, SIGNER)
        assert linked.data.chain is not None
        watched.chain = linked.data.chain
        watched.count += 1
        outputs.append(Output(source, topics.ALERTS, alert.subject.encode(), codec.encode(linked)))
        metrics.alert_raised(alert)
        _chained_alerts.append((topic, alert.time.timestamp()))
    return outputs


async def _publish(outputs: list[Output]) -> None:
    for output in outputs:
        await TOPICS[output.topic].send(key=output.key, value=output.value, headers=list(HEADERS[output.topic]))


# The agents yield nothing: faust answers a record whose headers name a reply topic with what its
# agent yields for it, so any producer of an input topic could make the worker write to a topic of
# its choosing (or stop the agent, with a reply topic that is not UTF-8).
@app.agent(streams)
async def watch(stream: faust.StreamT[Any]) -> None:
    async for event in stream.events():
        message = event.message
        await publish_chained(watch_record(message.topic, message.partition, message.offset, message.timestamp, event.key, event.value))


async def publish_chained(outputs: list[Output]) -> None:
    """``outputs`` published, their alerts once the values of the tables that chained them are in
    the changelog (``_write_chained``). A worker that dies before that published none of them, and
    its successor chains them afresh, in whatever order the streams then come; one that dies
    after resumes from a value that holds them, and their events, delivered again, publish the
    same bytes. (Published first and chained again after a restart, an alert raised from one
    stream would follow one raised from another the other way round: the same id, another
    chain, a break in the table's chain.)"""
    if not _chained_alerts:  # no alert chained (most events, and those delivered again): nothing to wait for
        await _publish(outputs)
        return
    raised = _chained_alerts.copy()
    _chained_alerts.clear()
    chained = {output.key for output in outputs if output.topic == topics.ALERTS and output.key in _changed}
    if chained:
        await _write_chained(chained)
    await _publish(outputs)
    now = time.time()
    for topic, at in raised:
        metrics.ALERT_LATENCY.labels(topic).observe(max(now - at, 0.0))


def watch_record(name: str, partition: int, offset: int, timestamp: float, key: bytes | None, raw: bytes | None) -> list[Output]:
    """What a record of the watched topics makes (alerts, facts), or its dead letter: never an
    exception, whatever its key, value and size, so that no record can stop the worker (faust
    restarts a crashed agent, and the record is lost without a word). A dead letter that cannot
    be read is passed over: a dead letter of a dead letter could loop."""
    topic = name.removeprefix(settings.topic_prefix)
    try:
        if topic in REFUSALS:
            return _refused_device_message(raw or b"", name, partition, offset)
        decoded = codec.decode(raw or b"")
        travels_on = topics.ALERTS if topic == UNCHAINED_ALERTS else topic  # the unchained alerts come back
        if decoded.topic != travels_on:  # it would be read as what it is not
            raise codec.InvalidEventError(f"a {decoded.event_type} event travels on {decoded.topic}, not on {topic}")
        table_key = decoded.subject.encode()
        _check_owned(key, partition, table_key, f"its table {decoded.subject!r}")
        return _watched_event(decoded, table_key, name, partition, offset, timestamp)
    except Exception as error:
        if topic in REFUSALS:
            log.exception("a dead letter could not be read", offset=offset)
            return []
        return [_dead_letter(name, partition, offset, key, raw or b"", error)]


def _watched_event(decoded: Event, key: bytes, name: str, partition: int, offset: int, timestamp: float) -> list[Output]:
    topic = name.removeprefix(settings.topic_prefix)
    source = f"{topic}:{offset}"
    watched = _watch_of(key, decoded.subject)
    if watched.outbox.seen(topic, offset):
        return watched.outbox.of(topic, offset)
    with _changing(_changed, key, watched):
        if isinstance(decoded, AlertRaised):  # back to its table's chain, once however often it comes
            outputs = _alert_outputs(source, [decoded], watched, topic) if watched.first_return(decoded.id) else []
        else:
            table_watch = TableWatch(watched.state)
            raised, facts = table_watch.feed(decoded)
            _touched.setdefault(key, set()).update(table_watch.touched)
            outputs = _alert_outputs(source, [raise_alert(r.finding, r.context, r.time) for r in raised], watched, topic)
            outputs += [Output(source, "facts", fact.key.encode(), _encode(fact)) for fact in facts]
            metrics.ROUNDS_CHECKED.inc(table_watch.rounds_checked)
            metrics.table_event(decoded, watched.state)
            now = time.time()
            metrics.EVENT_LATENCY.labels(topic).observe(max(now - decoded.time.timestamp(), 0.0))
            metrics.QUEUE_LATENCY.labels(topic).observe(max(now - timestamp, 0.0))
        outputs = [_fitting(output, name, partition, offset) for output in outputs]  # as kept, for a redelivery
        watched.outbox.record(topic, offset, outputs)
    return outputs


def _check_owned(key: bytes | None, partition: int, owner_key: bytes, owner: str) -> None:
    """Refuses a record not keyed by what it belongs to (``owner_key``), or read on a partition
    other than that key's (a producer may name the partition it writes to). A table's or chart's
    value counts its events' offsets on its key's partition: an offset of another would be taken
    for one of those, and could make its owner's next events look applied already, and pass
    unchecked."""
    if key != owner_key:
        shown = "no key" if key is None else f"the key {key[:60]!r}{'...' if len(key) > 60 else ''}"
        raise codec.InvalidEventError(f"{shown}, not {owner}: a record is keyed by what it belongs to, and read on that key's partition")
    home = partition_for(owner_key, settings.partitions)
    if partition != home:
        raise codec.InvalidEventError(
            f"read on partition {partition}, not on {home}, its key's: a record is read on the partition its key goes to"
        )


def _dead_letter(name: str, partition: int | None, offset: int, key: bytes | None, payload: bytes, error: Exception) -> Output:
    """The dead letter of a record the detectors cannot use (``InvalidEventError``: not the
    contract), or that they failed on (a bug: logged)."""
    kind = deadletter.INVALID
    if not isinstance(error, codec.InvalidEventError):
        log.exception("processing failed", topic=name, partition=partition, offset=offset)
        kind = deadletter.INTERNAL
    reason = str(error) if kind == deadletter.INVALID else f"internal error: {type(error).__name__}: {error}"
    return _letter(name, partition, offset, key, payload, reason, kind)


def _fitting(output: Output, name: str, partition: int | None, offset: int) -> Output:
    """An output, or its dead letter if it is too large for the broker (its send would fail, and
    the worker with it, at every restart)."""
    if output.topic == DEADLETTER_TOPIC or topics.fits(output.key, output.value):
        return output
    reason = (
        f"its output to {output.topic} is {len(output.key) + len(output.value):,} bytes, over the broker's maximum record: not published"
    )
    log.error("output too large", topic=name, offset=offset, output=output.topic, size=len(output.value))
    letter = _letter(name, partition, offset, output.key, output.value, reason, deadletter.INTERNAL)
    return msgspec.structs.replace(letter, source=output.source)  # kept, and found, as the output would be


def _letter(name: str, partition: int | None, offset: int, key: bytes | None, payload: bytes, reason: str, kind: str) -> Output:
    metrics.DEAD_LETTERS.labels(SERVICE, name).inc()
    letter = deadletter.dead_letter(
        SERVICE,
        payload,
        reason,
        origin=name,
        topic=name,
        partition=partition,
        offset=offset,
        key=key.decode(errors="replace") if key else None,
        kind=kind,
    )
    return Output(f"{name}:{offset}", DEADLETTER_TOPIC, deadletter.record_key(key), deadletter.encode(letter))


_TABLE_STREAMS = {settings.topic(name): name for name in (topics.SHOE, topics.TABLE, topics.SETTLEMENT)}
# The input topics keyed as the values whose outboxes name them (the tables' by table id, the
# charts' by patron or dealer; ``watch_record`` and ``chart_record`` refuse a record keyed
# otherwise), by name, and as their outputs name them. A device's refused message is not among
# them: its letter is keyed by the table it claims, cut to a length, or by any bytes it came with.
CO_PARTITIONED = {**_TABLE_STREAMS, settings.topic(UNCHAINED_ALERTS): UNCHAINED_ALERTS, settings.topic(FACTS): "facts"}


def _unapplied_offsets(assigned: Set[TP]) -> dict[TP, int]:
    """Per assigned partition of the table streams, the offset after the last event its recovered
    tables applied (see transport.py). Every commit writes the values of the tables its events
    changed to the changelog partition of their input partition (a table's events are on the
    partition its id hashes to): the furthest of them says how far the changelog got. The versions
    of parts of these partitions that no head names are orphans, deleted in time."""
    wanted = {(_TABLE_STREAMS[tp.topic], tp.partition): tp for tp in assigned if tp.topic in _TABLE_STREAMS}
    held = {partition for _, partition in wanted}
    after: dict[TP, int] = {}
    named: set[bytes] = set()
    for key, value in watch_table.data.items():
        if is_part(key):
            continue
        progress = _table_progress.decode(value)
        named.update(part_key(key, name, version) for name, version in progress.parts if version != CARRIED)
        partition = partition_for(key, settings.partitions)
        for topic, offset in progress.outbox.applied.items():
            tp = wanted.get((topic, partition))
            if tp is not None:
                after[tp] = max(after.get(tp, 0), offset + 1)
    found = {key: due for key, (_, due) in _orphans.items()}  # found before: their time runs on
    due = time.monotonic() + app.conf.producer_request_timeout
    _orphans.clear()
    for key in watch_table.data:
        if is_part(key) and key not in named and (partition := partition_for(table_of(key), settings.partitions)) in held:
            _orphans[key] = (partition, found.get(key, due))
    return after


app.unapplied_offsets = _unapplied_offsets


def _watch_of(key: bytes, table_id: str) -> TableValue:
    """The table's ``TableValue``: changed and not yet staged, or the object this worker encoded
    into the table's value if the value is still that one (the same bytes object), else decoded
    from the value."""
    changed = _changed.get(key)
    if changed is not None:
        return changed
    cached = _written.get(key)
    stored = watch_table.get(key)
    if cached is not None and stored is cached[0]:
        return cached[1]
    if not stored:
        return TableValue(TableState(table_id))
    metrics.TABLES_DECODED.inc()
    return stored_table(key)


def stored_table(key: bytes) -> TableValue:
    """The table's value as ``watch_table`` holds it: its head, and the parts the head carries or names."""
    value = _table_value.decode(watch_table.data[key])
    if value.parts:
        value.state = joined(value.state, ((name, _part(key, value, name, version)) for name, version in value.parts))
    return value


def _part(key: bytes, head: TableValue, name: bytes, version: bytes) -> bytes:
    stored = head.carried.get(name) if version == CARRIED else watch_table.data.get(part_key(key, name, version))
    if stored is None:  # a changelog that lost what compaction keeps: this table cannot be judged
        raise LookupError(f"the changelog lacks the part {name[:60]!r} (version {version!r}) of the table {key[:60]!r}")
    return stored


def _chart_of(key: bytes) -> ChartValue:
    """The patron's or dealer's ``ChartValue``: changed since the last commit, else decoded."""
    changed = _changed_charts.get(key)
    if changed is not None:
        return changed
    stored = chart_table.get(key)
    return _chart_value.decode(stored) if stored else ChartValue(patterns.Cusum())


@contextmanager
def _changing(changed: dict[bytes, Any], key: bytes, value: Any) -> Iterator[None]:
    """Around an event's changes to a table's or chart's value: the value is written at the next
    commit (or the one under way, if it has not staged it yet); or, if the event fails half-way (a
    bug: faust logs it and goes on), it goes back to the one last written, without its other
    changes since, even those of events a commit under way covers, rather than keep a
    half-changed object."""
    try:
        yield
    except BaseException:
        changed.pop(key, None)
        _written.pop(key, None)
        raise
    changed[key] = value


async def _write_changed(assigned: Set[TP], committed: Mapping[TP, int | None]) -> None:
    """Every table and chart changed since the last commit into its faust table and changelog,
    those of partitions this worker still holds; returns once the broker has them all. Staged a
    slice at a time (``staged``), the events going on between slices for as long as a slice, and
    sent straight to the producer, past faust's buffer (it holds the streams back while it has over
    100 messages)."""
    sent = []
    for changelog in staged(assigned, committed, STAGING_SLICE_S):
        sent += await _send(changelog)
        await asyncio.sleep(STAGING_SLICE_S)
    for delivered in sent:
        await delivered


async def _send(changelog: list[tuple[str, int, bytes, bytes | None]]) -> list[Any]:
    """The changelog's records handed to the producer, in order: their deliveries, to await."""
    return [
        await app.producer.send(topic, key, value, partition, None, list(MSGPACK_HEADERS)) for topic, partition, key, value in changelog
    ]


async def _write_chained(keys: Set[bytes]) -> None:
    """The values of these tables, whose chains grew, written ahead of the next commit; returns
    once the broker has them, and a checkpoint counting their alerts waits for that too. The
    write goes on if the caller is cancelled (a rebalance). A write that fails stops the worker,
    and raises here: its alerts are not published, and its successor resumes from the last
    commit."""
    changelog: list[tuple[str, int, bytes, bytes | None]] = []
    version = b"%s.%d" % (WRITER, next(_writes))
    for key in keys:
        _write_table(key, _changed.pop(key), partition_for(key, settings.partitions), version, changelog, _touched.pop(key, None))
    written = asyncio.ensure_future(_delivered(changelog))
    _chains_in_flight.add(written)
    written.add_done_callback(_chains_in_flight.discard)
    failed = await asyncio.shield(written)
    if failed is not None:
        raise failed


async def _delivered(changelog: list[tuple[str, int, bytes, bytes | None]]) -> Exception | None:
    """None once the broker has every record of ``changelog``; else what failed, the worker stopped."""
    try:
        for delivered in await _send(changelog):
            await delivered
    except Exception as error:
        await app.crash(error)
        return error
    return None


def stage_changed(assigned: Set[TP], committed: Mapping[TP, int | None]) -> list[tuple[str, int, bytes, bytes | None]]:
    """``staged`` in one slice: the changelog records to send, (topic, partition, key, value)."""
    return [record for changelog in staged(assigned, committed, math.inf) for record in changelog]


def staged(assigned: Set[TP], committed: Mapping[TP, int | None], slice_s: float) -> Iterator[list[tuple[str, int, bytes, bytes | None]]]:
    """The tables and charts changed since the last commit, of partitions in ``assigned``, set
    into their faust tables, each without the outputs of events below the ``committed`` offsets
    (``Outbox.forget``), ``slice_s`` seconds of encoding at a time: the changelog records of each
    slice, (topic, partition, key, value; None: a tombstone), the tombstones of orphans due first,
    a table's head after its parts. The commit's offsets were fixed before: an event between
    slices is after them. Its change goes with this commit if its table is not staged yet (ahead
    of the offsets: a restarted worker skips it as applied), else with the next."""
    streams = {tp.partition for tp in assigned if tp.topic in _TABLE_STREAMS}
    facts = {tp.partition for tp in assigned if tp.topic == facts_topic.get_topic_name()}
    done: dict[int, dict[str, int]] = {}  # per partition, the committed offset of each topic keyed as its tables are
    for tp, offset in committed.items():
        topic = CO_PARTITIONED.get(tp.topic)
        if topic is not None and offset is not None:
            done.setdefault(tp.partition, {})[topic] = offset
    changelog: list[tuple[str, int, bytes, bytes | None]] = []
    now = time.monotonic()
    for key, (partition, due) in list(_orphans.items()):
        if due <= now:
            if partition in streams and key in watch_table.data:
                _put(watch_table, key, None, partition, changelog)
            del _orphans[key]
    version = b"%s.%d" % (WRITER, next(_writes))
    ends = time.perf_counter() + slice_s
    for changed, partitions in ((_changed, streams), (_changed_charts, facts)):
        for key in list(changed):
            value, touched = changed.pop(key, None), _touched.pop(key, None)
            if value is None:  # an event on it failed meanwhile: it is back to its last written value
                continue
            partition = partition_for(key, settings.partitions)
            if partition not in partitions:  # no longer this worker's: its new owner resumes from the last commit
                continue
            value.outbox.forget(done.get(partition, {}))
            if isinstance(value, TableValue):
                _write_table(key, value, partition, version, changelog, touched)
            else:
                _put(chart_table, key, _encode(value), partition, changelog)
            if time.perf_counter() >= ends:
                yield changelog
                changelog = []
                ends = time.perf_counter() + slice_s
    while len(_written) > WATCH_CACHE_TABLES:
        _written.popitem(last=False)
    yield changelog


def _write_table(
    key: bytes,
    value: TableValue,
    partition: int,
    version: bytes,
    changelog: list[tuple[str, int, bytes, bytes | None]],
    touched: set[str] | None,
) -> None:
    """The table's value into ``watch_table`` and ``changelog`` (``parts.py``), and this worker's
    cache of what it wrote (``_written``): its head, carrying
    the parts of its state that changed since the last head (every part this worker has not
    written, the first time), after the parts the last head carried and that have not changed since,
    stored as ``version``, and before tombstones of this worker's versions it no longer names. Its
    rounds not in ``touched`` are as at the last head: not encoded again (all are compared when
    ``touched`` is None)."""
    mine = WRITER + b"."
    last = dict(value.parts)
    carried = value.carried
    store: Any = watch_table.data
    held: dict[bytes, bytes] = store.data  # the store's dict: its mapping methods cost a microsecond a call
    unchanged = set()
    if touched is not None:
        for round_id in value.state.rounds.keys() - touched:
            name = ROUND + round_id.encode()
            was = last.get(name)  # None, CARRIED (empty) or a version: only this worker's are kept
            if name in carried if was == CARRIED else was and was.startswith(mine) and part_key(key, name, was) in held:
                unchanged.add(name)
    head_state, encoded_parts = split(value.state, unchanged)
    named, carrying = [], {}
    for name, encoded in encoded_parts.items():
        was = last.get(name)
        if was == CARRIED and (encoded is None or encoded == carried.get(name)):  # settled: stored on its own
            _put(watch_table, part_key(key, name, version), carried[name], partition, changelog)
            named.append((name, version))
        elif was and was.startswith(mine) and (encoded is None or held.get(part_key(key, name, was)) == encoded):
            named.append((name, was))
        else:
            assert encoded is not None  # only a part kept is left unencoded
            carrying[name] = encoded
            named.append((name, CARRIED))
    now_named = set(named)
    gone = [(name, was) for name, was in last.items() if was.startswith(mine) and (name, was) not in now_named]
    value.parts, value.carried = tuple(named), carrying
    head = _encode(msgspec.structs.replace(value, state=head_state))
    _put(watch_table, key, head, partition, changelog)
    for name, was in gone:
        _put(watch_table, part_key(key, name, was), None, partition, changelog)
    _written[key] = (head, value)
    _written.move_to_end(key)


def _put(table: Any, key: bytes, value: bytes | None, partition: int, changelog: list[tuple[str, int, bytes, bytes | None]]) -> None:
    """What ``table[key] = value`` (or, for None, ``del table[key]``) does, but for the partition
    (that takes the current event's, and a commit is not in an event): the table's, as in every
    stream it comes from."""
    if value is None:
        table.data.pop(key, None)
    else:
        table.data[key] = value
    changelog.append((table.changelog_topic.get_topic_name(), partition, key, value))


app.before_commit = _write_changed
app.commit_timeout = float(os.environ.get("COMMIT_TIMEOUT_S", app.commit_timeout))
app.fetch_gather_ms = settings.fetch_gather_ms


def _refused_device_message(raw: bytes, name: str, partition: int, offset: int) -> list[Output]:
    """A dead letter (from ``name``, a service's own topic) of a device message with a bad signature:
    an alert for the table it names, sent unchained to that table's partition. The letter's key is
    whatever the message came with, so it comes on any partition, held by any worker: only the
    table's own may chain its alert. Delivered again, it makes the same alert (the same id), which
    the table chains once (``TableValue.first_return``)."""
    topic = name.removeprefix(settings.topic_prefix)
    try:
        letter = deadletter.decode(raw)
    except msgspec.DecodeError:
        return []  # not ours to judge: a dead letter is already where bad input ends
    found = signature_finding(letter, REFUSALS[topic])
    if found is None:
        return []
    alert = raise_alert(found.finding, found.context, found.time)
    return [_fitting(Output(f"{topic}:{offset}", UNCHAINED_ALERTS, alert.subject.encode(), codec.encode(alert)), name, partition, offset)]


@app.timer(interval=CHECKPOINT_SECONDS)  # type: ignore[untyped-decorator]  # faust is untyped
async def publish_checkpoints() -> None:
    """For each partition this worker holds, the signed count and head of every table of it with
    alerts, onto that partition of the alerts topic (after the alerts it counts: one producer)."""
    if SIGNER is None:
        return
    heads = await chain_heads_written({tp.partition for tp in app.consumer.assignment() if tp.topic == settings.topic(topics.SHOE)})
    if heads is None:
        return
    now = datetime.now(UTC)
    every = round(CHECKPOINT_SECONDS)
    for partition, tables in sorted(heads.items()):
        for made in checkpoints(tables, now, SIGNER, partition, settings.partitions, every):
            key, value = made.subject.encode(), codec.encode(made)
            if not topics.fits(key, value):  # not sent: a send that fails stops the timer, and the worker
                log.error("checkpoint too large", partition=partition, tables=len(made.data.tables), size=len(value))
                continue
            await alerts_topic.send(key=key, value=value, partition=partition, headers=list(HEADERS[topics.ALERTS]))


async def chain_heads_written(held: Set[int]) -> dict[int, dict[str, ChainHead]] | None:
    """``chain_heads``, returned once the broker has every value whose chain they count (the
    writes of chains under way, ``_write_chained``): a checkpoint never names an alert a crash
    could chain again. None if such a write failed: the worker stops."""
    heads = chain_heads(held)
    return None if any(await asyncio.gather(*_chains_in_flight)) else heads


def chain_heads(held: Set[int]) -> dict[int, dict[str, ChainHead]]:
    """For each partition in ``held``, the alert count and last chain value of each of its tables
    with alerts."""
    heads: dict[int, dict[str, ChainHead]] = {partition: {} for partition in held}
    for key in {*watch_table.data.keys(), *_changed}:
        if is_part(key):
            continue
        partition = partition_for(key, settings.partitions)
        if partition in heads:
            count, chain = _head_of(key)
            if count:
                heads[partition][key.decode()] = ChainHead(count, chain)
    return heads


def _head_of(key: bytes) -> tuple[int, str]:
    """A table's alert count and last chain value: what this worker changed or wrote, else decoded."""
    watched = _changed.get(key)
    if watched is None:
        cached, stored = _written.get(key), watch_table.data.get(key)
        watched = cached[1] if cached is not None and stored is cached[0] else None
        if watched is None:
            head = _table_head.decode(stored) if stored else TableHead()
            return head.count, head.chain
    return watched.count, watched.chain


@app.agent(facts_topic)
async def chart(stream: faust.StreamT[Any]) -> None:
    async for event in stream.events():
        message = event.message
        await _publish(chart_record(message.topic, message.partition, message.offset, event.key, event.value))


def chart_record(name: str, partition: int, offset: int, key: bytes | None, raw: bytes | None) -> list[Output]:
    """What a pattern fact makes (a pattern alert, back to its table's watch), or its dead
    letter; never an exception (``watch_record``)."""
    try:
        fact: Fact = _facts.decode(raw or b"")
    except (msgspec.DecodeError, RecursionError) as error:
        return [_dead_letter(name, partition, offset, key, raw or b"", codec.InvalidEventError(f"not a pattern fact: {error}"))]
    try:
        fact_key = fact.key.encode()
        _check_owned(key, partition, fact_key, f"its patron or dealer {fact.key!r}")
        charted = _chart_of(fact_key)
        if charted.outbox.seen("facts", offset):
            return charted.outbox.of("facts", offset)
        with _changing(_changed_charts, fact_key, charted):
            found = chart_finding(charted.chart, fact)
            outputs = []
            if found:
                alert = raise_alert(found.finding, found.context, found.time)
                outputs.append(Output(f"facts:{offset}", UNCHAINED_ALERTS, alert.subject.encode(), codec.encode(alert)))
            outputs = [_fitting(output, name, partition, offset) for output in outputs]
            charted.outbox.record("facts", offset, outputs)
    except Exception as error:
        return [_dead_letter(name, partition, offset, key, raw or b"", error)]
    return outputs
