"""Evidence out of the live topics: a replayable event log of a time window, with its manifest.

``export_log`` reads ``baccarat.shoe``, ``baccarat.table`` and ``baccarat.settlement`` (the
streams the detectors watch) between two times and writes what they hold as a recorded log, the
format ``surveil replay`` reads (one CloudEvents JSON object a line, gzipped when the name ends
in ``.gz``), and beside it a manifest: the file's sha256, the events by type, the topic
partitions and the offsets it covers, the window, the tables, the software's version.

- The window is the records' Kafka timestamps (when they reached the topic), looked up with
  ``offsets_for_times``: per partition, the records from the first at or after ``start`` to the
  last before ``end``, one contiguous range of offsets each, read ``read_committed`` (an aborted
  transaction's records are not evidence of anything that happened). A window that reaches past
  the last committed record ends there, at the time of the export.
- The log replays to the alerts the live detectors raised: each table's events keep the order of
  their topic (a table is on one partition), which is all a table's checks depend on
  (``surveil.detect.watch``), and the streams are merged by event time, as they happened at the
  tables, for the charts that follow patrons and dealers across tables.
- What the live detectors refuse is left out, so that a replay does not see it either: a record
  that is not a contract event, or an event on a topic it does not belong to (each one listed in
  the manifest's ``refused``, with its offset and why). Every other record is written as the bytes
  it had on the topic.
- A window that cuts through a shoe gives a log that begins or ends mid-shoe: its replay sees the
  first rounds without their shoe's start and the last ones unsettled, and may raise what the live
  detectors, which saw the whole shoe, did not. Export whole shoes for an alert's evidence.

Each partition's records go to a spool file in the output's directory first (the merge needs
every partition's next event; a window may hold months), then are merged into the log. The log
is written under a temporary name and renamed when complete.
"""

from __future__ import annotations

import gzip
import hashlib
import heapq
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import msgspec

from .. import DISTRIBUTION, version
from ..events import codec, topics
from ..runtime.config import Settings

EXPORTED = (topics.SHOE, topics.TABLE, topics.SETTLEMENT)  # what the detectors watch (replay.WATCHED_TOPICS)
REFUSED_LISTED = 1000  # refused records listed by offset in the manifest (all are counted)
STALL_S = 60.0  # no record for this long while some are still due: the broker is away
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_KEY_DIGITS = 20  # a spooled line starts with its event time in microseconds, zero-padded

Progress = Callable[[int, int], None]  # offsets read so far, offsets in the window


class ExportError(RuntimeError):
    """The export could not be made (a topic missing or not readable, the broker gone)."""


class PartitionRange(msgspec.Struct, frozen=True):
    """What the export covers of one partition: offsets ``start`` (inclusive) to ``end`` (exclusive)."""

    topic: str  # its name on the broker (with the deployment's TOPIC_PREFIX)
    partition: int
    start: int
    end: int
    events: int = 0  # written to the log (records of other tables, refused ones and transaction markers are not)


class Refused(msgspec.Struct, frozen=True):
    """A record left out of the log: the live detectors refused it too (a dead letter)."""

    topic: str
    partition: int
    offset: int
    reason: str


class Manifest(msgspec.Struct, kw_only=True):
    """What an export holds and where it came from; ``LOG.manifest.json`` beside ``LOG.jsonl.gz``."""

    file: str  # the log's file name
    sha256: str  # of the file as written (gzipped or not)
    bytes: int
    start: datetime  # the window asked for: record timestamps from ``start`` up to ``end``
    end: datetime
    tables: list[str] | None  # the tables asked for; None: every table
    tables_found: list[str]
    events: int
    events_by_type: dict[str, int]
    first_event_time: datetime | None
    last_event_time: datetime | None
    partitions: list[PartitionRange]
    refused_count: int
    refused: list[Refused]  # the first REFUSED_LISTED of them
    warnings: list[str]
    principal: str  # who read the topics ('' on a broker without authentication)
    software: str  # "baccarat-surveil <version>"
    created: datetime


def manifest_path(log: Path) -> Path:
    """``round.jsonl.gz`` -> ``round.manifest.json`` (beside it)."""
    name = log.name.removesuffix(".gz").removesuffix(".jsonl")
    return log.with_name(f"{name}.manifest.json")


def read_manifest(path: Path) -> Manifest:
    return msgspec.json.decode(path.read_bytes(), type=Manifest)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def export_log(
    settings: Settings,
    start: datetime,
    end: datetime,
    tables: Sequence[str] | None,
    out: Path,
    progress: Progress | None = None,
) -> Manifest:
    """Export the window [``start``, ``end``) of the watched topics, for ``tables`` (None: all),
    into the log ``out`` and its manifest beside it (``manifest_path``); returns the manifest.

    ``settings`` says which broker, deployment (``topic_prefix``) and principal: one that may
    READ the three topics (``auditor``, or ``admin``; docs/security.md). ``progress`` is called
    with the offsets read and the offsets in the window as the reading goes."""
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("the window's times need a time zone")
    if end <= start:
        raise ValueError(f"the window ends ({end.isoformat()}) before it starts ({start.isoformat()})")
    wanted = frozenset(tables) if tables else None
    out = Path(out)
    written = out.with_name(out.name + ".part")
    with tempfile.TemporaryDirectory(prefix=".export-", dir=out.parent) as spool_dir:
        reading = _read_window(settings, start, end, wanted, Path(spool_dir), progress)
        try:
            with open(written, "wb") as raw, ExitStack() as stack:
                sink: IO[bytes] | gzip.GzipFile = raw
                if out.name.endswith(".gz"):  # no name or time in the header: the same events give the same bytes
                    sink = stack.enter_context(gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0))
                for line in _merged(reading.spools):
                    sink.write(line)
        except BaseException:
            written.unlink(missing_ok=True)
            raise
        os.replace(written, out)
    manifest = Manifest(
        file=out.name,
        sha256=file_sha256(out),
        bytes=out.stat().st_size,
        start=start,
        end=end,
        tables=sorted(wanted) if wanted is not None else None,
        tables_found=sorted(reading.tables),
        events=reading.by_type.total(),
        events_by_type=dict(sorted(reading.by_type.items())),
        first_event_time=reading.first,
        last_event_time=reading.last,
        partitions=reading.ranges,
        refused_count=reading.refused_count,
        refused=reading.refused,
        warnings=reading.warnings,
        principal=settings.kafka_username,
        software=f"{DISTRIBUTION} {version()}",
        created=datetime.now(UTC),
    )
    manifest_path(out).write_bytes(msgspec.json.format(msgspec.json.encode(manifest)) + b"\n")
    return manifest


class _Reading:
    """What reading the window found: per partition a spool of ``<event time> <line>`` lines."""

    def __init__(self) -> None:
        self.spools: list[Path] = []
        self.ranges: list[PartitionRange] = []
        self.refused: list[Refused] = []
        self.refused_count = 0
        self.warnings: list[str] = []
        self.by_type: Counter[str] = Counter()
        self.tables: set[str] = set()
        self.first: datetime | None = None
        self.last: datetime | None = None


def _read_window(
    settings: Settings, start: datetime, end: datetime, wanted: frozenset[str] | None, spool_dir: Path, progress: Progress | None
) -> _Reading:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        **settings.kafka_client(),
        client_id=f"surveil-export-{settings.instance_id}",
        group_id=None,  # assigned partitions, nothing committed: an export leaves no trace on the groups
        enable_auto_commit=False,
        isolation_level="read_committed",
        max_poll_records=5000,
    )
    try:
        names: dict[Any, str] = {}  # each partition's topic, as the contract names it
        for name in EXPORTED:
            found = consumer.partitions_for_topic(settings.topic(name))
            if not found:
                raise ExportError(f"topic {settings.topic(name)} is missing, or {settings.kafka_username or 'this client'} may not read it")
            names |= {TopicPartition(settings.topic(name), p): name for p in sorted(found)}
        partitions = list(names)
        first_offsets = consumer.beginning_offsets(partitions)
        last_offsets = consumer.end_offsets(partitions)  # read_committed: the last stable offset
        starts = consumer.offsets_for_times({tp: _ms(start) for tp in partitions})
        ends = consumer.offsets_for_times({tp: _ms(end) for tp in partitions})
        window = {}
        for tp in partitions:
            begin = starts[tp].offset if starts[tp] is not None else last_offsets[tp]
            stop = min(ends[tp].offset, last_offsets[tp]) if ends[tp] is not None else last_offsets[tp]
            window[tp] = (begin, max(begin, stop))
        reading = _Reading()
        for tp in partitions:
            begin = window[tp][0]
            if begin == first_offsets[tp] and begin > 0:
                reading.warnings.append(
                    f"{tp.topic}-{tp.partition}: offsets before {begin} are gone (retention): the window may begin later than asked"
                )
        _consume(consumer, names, window, wanted, spool_dir, reading, progress)
        return reading
    finally:
        consumer.close()


def _consume(
    consumer: Any,
    names: dict[Any, str],
    window: dict[Any, tuple[int, int]],
    wanted: frozenset[str] | None,
    spool_dir: Path,
    reading: _Reading,
    progress: Progress | None,
) -> None:
    total = sum(stop - begin for begin, stop in window.values())
    due = {tp for tp, (begin, stop) in window.items() if stop > begin}
    counts: Counter[Any] = Counter()
    with ExitStack() as stack:
        spools: dict[Any, IO[bytes]] = {}
        for number, tp in enumerate(window):
            path = spool_dir / f"{number:04d}"
            reading.spools.append(path)
            spools[tp] = stack.enter_context(open(path, "wb"))
        consumer.assign(sorted(due, key=list(window).index))
        for tp in due:
            consumer.seek(tp, window[tp][0])
        if progress:
            progress(0, total)
        heard = time.monotonic()
        while due:
            polled = consumer.poll(timeout_ms=500)
            for tp, records in polled.items():
                stop = window[tp][1]
                for record in records:
                    if record.offset < stop:
                        counts[tp] += _take(tp, names[tp], record, wanted, spools[tp], reading)
            if polled:
                heard = time.monotonic()
            elif time.monotonic() - heard > STALL_S:
                raise ExportError(f"no record for {STALL_S:.0f} s from {sorted(f'{tp.topic}-{tp.partition}' for tp in due)}")
            done = 0
            for tp, (begin, stop) in window.items():
                position = consumer.position(tp) if tp in due else stop
                if position >= stop and tp in due:  # transaction markers and aborted records end a range unseen
                    due.discard(tp)
                    consumer.pause(tp)
                done += min(position, stop) - begin
            if progress:
                progress(done, total)
    reading.ranges = [PartitionRange(tp.topic, tp.partition, begin, stop, counts[tp]) for tp, (begin, stop) in window.items()]


def _take(tp: Any, topic: str, record: Any, wanted: frozenset[str] | None, spool: IO[bytes], reading: _Reading) -> int:
    """Spool one record if it belongs in the log: 1 if it does, else 0."""
    raw: bytes = record.value or b""
    try:
        event = codec.decode(raw)
        if event.topic != topic:  # the live detectors dead-letter it (anomaly_detection/app.py)
            raise codec.InvalidEventError(f"a {event.event_type} event travels on {event.topic}, not on {topic}")
    except codec.InvalidEventError as error:
        reading.refused_count += 1
        if len(reading.refused) < REFUSED_LISTED:
            reading.refused.append(Refused(tp.topic, tp.partition, record.offset, str(error)))
        return 0
    if wanted is not None and event.subject not in wanted:
        return 0
    if b"\n" in raw or b"\r" in raw:  # whitespace of valid JSON, but a log has one event a line
        raw = codec.encode(event)
    spool.write(b"%0*d " % (_KEY_DIGITS, (event.time - _EPOCH) // timedelta(microseconds=1)) + raw + b"\n")
    reading.by_type[event.event_type] += 1
    reading.tables.add(event.subject)
    reading.first = event.time if reading.first is None else min(reading.first, event.time)
    reading.last = event.time if reading.last is None else max(reading.last, event.time)
    return 1


def _merged(spools: list[Path]) -> Iterator[bytes]:
    """The spooled lines of every partition in one stream by event time, each partition's in its
    own order (``heapq.merge`` takes the next line of one partition only once it has passed the
    line before it), ties in the order of ``EXPORTED``; without the time."""
    with ExitStack() as stack:
        files = [stack.enter_context(open(path, "rb")) for path in spools]
        for line in heapq.merge(*files, key=lambda line: line[:_KEY_DIGITS]):
            yield line[_KEY_DIGITS + 1 :]


def _ms(moment: datetime) -> int:
    """Milliseconds since the epoch, Kafka's timestamps."""
    return (moment - _EPOCH) // timedelta(milliseconds=1)
