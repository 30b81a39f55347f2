"""Offline replay: a recorded event log through the same detectors as the live service.

A log is one CloudEvents JSON object per line (``.jsonl``, or gzipped ``.jsonl.gz``), in the order
the events were published. Lines that are not contract events are reported with their line
number and skipped; events of other topics (the table inputs, alerts) are passed over.

Tables are independent until their findings meet the cross-table charts (patrons and dealers
move between tables), so a replay splits like the live service does: each table's watch runs in
one of ``workers`` processes (a ``Shard``). This process deals each line to its table's shard
(``Router``), then puts their findings back in the log's order and judges them
(``FloorWatch.judge``). Any number of workers raises the same alerts, in the same order, with the same
chain.
"""

from __future__ import annotations

import gzip
import heapq
import multiprocessing
import queue
import traceback
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from io import BufferedIOBase
from itertools import islice
from pathlib import Path
from typing import Any, Protocol

import msgspec

from ..detect.alerts import Signer, checkpoint
from ..detect.floor import FloorWatch
from ..detect.watch import Fact, Raised
from ..events import codec, topics
from ..events.models import AlertCheckpoint, AlertRaised, Event

WATCHED_TOPICS = frozenset({topics.SHOE, topics.TABLE, topics.SETTLEMENT})
BATCH_LINES = 2048  # lines handed to the shards at a time
IN_FLIGHT = 4  # batches the shards may be behind this process's reading


@dataclass(frozen=True, slots=True)
class BadLine:
    number: int
    reason: str


@dataclass
class ReplayResult:
    alerts: list[AlertRaised] = field(default_factory=list)
    checkpoint: AlertCheckpoint | None = None  # with a signer: every table's count and head at the end
    bad_lines: list[BadLine] = field(default_factory=list)
    events: int = 0
    events_by_type: Counter[str] = field(default_factory=Counter)
    rounds_checked: int = 0
    tables: int = 0
    unboxed_bets: int = 0  # bets whose event does not say their layout box: Art. 15 not checked for them


def open_log(path: Path) -> BufferedIOBase:
    """The log's bytes, gunzipped when the file is gzip (by its magic number, not its name)."""
    with open(path, "rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gzipped else open(path, "rb")


def read_events(numbered: Iterable[tuple[int, bytes]], bad: Callable[[BadLine], None]) -> Iterator[tuple[int, Event]]:
    """The events of numbered lines, with their numbers; blank lines skipped, the others told to ``bad``."""
    for number, line in numbered:
        try:
            yield number, codec.decode(line)
        except codec.InvalidEventError as error:
            if line.strip():  # asked only of a line that failed: a copy of every line is not free
                bad(BadLine(number, str(error)))


Found = tuple[int, list[Raised], list[Fact]]  # what a table made of a line: raised findings, facts for the charts
Batch = tuple[int, list[bytes]]  # lines, and the number of the first
Numbered = list[tuple[int, bytes]]  # lines with their numbers: a shard's share of a batch


@dataclass
class ShardTotals:
    """What a shard counted, and what its tables found once the input ended (by first line)."""

    flushed: list[Found]
    bad_lines: list[BadLine]
    events_by_type: Counter[str]
    rounds_checked: int
    tables: int
    unboxed_bets: int


class _Envelope(msgspec.Struct):
    subject: str = ""  # the table: all routing needs; the rest of the line is skipped unchecked


class Router:
    """Deals the tables among ``count`` shards, in turn as each first appears, and each line to
    its table's shard: a shard reads only its own lines. A line with no table to go by goes to the first."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.owners: dict[str, int] = {}
        self.envelope = msgspec.json.Decoder(_Envelope)

    def owner(self, line: bytes) -> int:
        try:
            table_id = self.envelope.decode(line).subject
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            return 0
        if not table_id:
            return 0
        owner = self.owners.get(table_id)
        if owner is None:
            owner = self.owners[table_id] = len(self.owners) % self.count
        return owner

    def route(self, batch: Batch) -> list[Numbered]:
        first, lines = batch
        if self.count == 1:
            return [list(enumerate(lines, start=first))]
        shares: list[Numbered] = [[] for _ in range(self.count)]
        for number, line in enumerate(lines, start=first):
            shares[self.owner(line)].append((number, line))
        return shares


class Shard:
    """The watches of one share of the tables: numbered lines in, what their tables found out."""

    def __init__(self, profile: str | None) -> None:
        self.floor = FloorWatch(profile_override=profile)  # for its table watches; this shard judges nothing
        self.first_lines: dict[str, int] = {}
        self.bad_lines: list[BadLine] = []
        self.by_class: dict[type[Event], int] = {}  # counted by class, named at the end: cheaper per event

    def feed(self, numbered: Iterable[tuple[int, bytes]]) -> list[Found]:
        found, tables, by_class = [], self.floor.tables, self.by_class
        for number, event in read_events(numbered, self.bad_lines.append):
            cls = type(event)
            by_class[cls] = by_class.get(cls, 0) + 1
            if cls.topic in WATCHED_TOPICS:
                table_id = event.subject
                watch = tables.get(table_id)
                if watch is None:
                    self.first_lines[table_id] = number
                    watch = self.floor.watch(table_id)
                raised, facts = watch.feed(event)
                if raised or facts:
                    found.append((number, raised, facts))
        return found

    def finish(self) -> ShardTotals:
        tables = self.floor.tables
        return ShardTotals(
            flushed=[(self.first_lines[table_id], *watch.flush()) for table_id, watch in tables.items()],
            bad_lines=self.bad_lines,
            events_by_type=Counter({cls.__struct_config__.tag: n for cls, n in self.by_class.items()}),  # type: ignore[misc]
            rounds_checked=sum(watch.rounds_checked for watch in tables.values()),
            tables=len(tables),
            unboxed_bets=sum(watch.unboxed_bets for watch in tables.values()),
        )


class _Worker(Protocol):
    def send(self, share: Numbered) -> None: ...
    def receive(self) -> list[Found]: ...
    def finish(self) -> ShardTotals: ...
    def stop(self) -> None: ...


class _HereShard:
    """The one shard, in this process."""

    def __init__(self, profile: str | None) -> None:
        self.shard, self.done = Shard(profile), deque[list[Found]]()

    def send(self, share: Numbered) -> None:
        self.done.append(self.shard.feed(share))

    def receive(self) -> list[Found]:
        return self.done.popleft()

    def finish(self) -> ShardTotals:
        return self.shard.finish()

    def stop(self) -> None:
        pass


def _serve_shard(shard: Shard, inbox: Any, outbox: Any) -> None:
    """A worker process's life: its shares of the batches in until None, found out; then its totals."""
    try:
        while (share := inbox.get()) is not None:
            outbox.put(shard.feed(share))
        outbox.put(shard.finish())
    except BaseException:  # the replaying process raises it; a worker has no one else to tell
        outbox.put(RuntimeError(f"replay worker failed:\n{traceback.format_exc()}"))


class _ProcessShard:
    """A shard in a process of its own (forked: the detectors are already imported)."""

    def __init__(self, shard: Shard) -> None:
        context = multiprocessing.get_context("fork")
        self.inbox, self.outbox = context.Queue(), context.Queue()  # queues: a put never blocks either side
        self.process = context.Process(target=_serve_shard, args=(shard, self.inbox, self.outbox), daemon=True)
        self.process.start()

    def send(self, share: Numbered) -> None:
        self.inbox.put(share)

    def _get(self) -> Any:
        while True:
            alive = self.process.is_alive()  # asked first: a worker that had ended had sent all it would
            try:
                answer = self.outbox.get(timeout=1.0)
            except queue.Empty:
                if not alive:
                    raise RuntimeError(f"replay worker {self.process.pid} died (exit {self.process.exitcode})") from None
                continue
            if isinstance(answer, BaseException):
                raise answer
            return answer

    def receive(self) -> list[Found]:
        found: list[Found] = self._get()
        return found

    def finish(self) -> ShardTotals:
        self.inbox.put(None)
        totals: ShardTotals = self._get()
        return totals

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        for pipe in (self.inbox, self.outbox):  # what a failed worker left unread must not hold this process's exit
            pipe.cancel_join_thread()
            pipe.close()


def _batches(lines: Iterable[bytes]) -> Iterator[Batch]:
    lines, first = iter(lines), 1
    while batch := list(islice(lines, BATCH_LINES)):
        yield first, batch
        first += len(batch)


def replay(
    lines: Iterator[bytes],
    profile: str | None = None,
    on_alert: Callable[[AlertRaised], None] | None = None,
    on_event: Callable[[Event], None] | None = None,
    workers: int = 1,
    signer: Signer | None = None,
) -> ReplayResult:
    """Watch every table of ``lines`` across ``workers`` processes; judge, collect alerts and bad lines.

    ``on_event`` sees every event in the log's order, and before it each alert the events before
    it raised, as a single-process replay would call it. With ``signer`` (the detectors' key) the
    alerts are signed, and a checkpoint of every table closes them."""
    result = ReplayResult()
    judge = FloorWatch(profile_override=profile, signer=signer)

    def emit(found: Iterable[Found]) -> None:
        for _, raised, facts in found:
            alerts = judge.judge(raised, facts)
            result.alerts.extend(alerts)
            if on_alert:
                for alert in alerts:
                    on_alert(alert)

    def settle(batch: Batch) -> None:
        found = heapq.merge(*(shard.receive() for shard in shards), key=lambda item: item[0])
        if on_event is None:
            emit(found)
            return
        pending = next(found, None)
        first, lines = batch
        for number, event in read_events(enumerate(lines, start=first), lambda bad: None):  # its shard reports bad lines
            on_event(event)
            if pending is not None and pending[0] == number:
                emit([pending])
                pending = next(found, None)

    shards: list[_Worker] = [_HereShard(profile)] if workers <= 1 else [_ProcessShard(Shard(profile)) for _ in range(workers)]
    router = Router(len(shards))
    try:
        in_flight: deque[Batch] = deque()
        for batch in _batches(lines):
            for shard, share in zip(shards, router.route(batch)):
                shard.send(share)
            in_flight.append(batch)
            if len(in_flight) > IN_FLIGHT:
                settle(in_flight.popleft())
        while in_flight:
            settle(in_flight.popleft())
        totals = [shard.finish() for shard in shards]
    finally:
        for shard in shards:
            shard.stop()
    emit(sorted((item for total in totals for item in total.flushed), key=lambda item: item[0]))
    result.bad_lines = sorted((bad for total in totals for bad in total.bad_lines), key=lambda bad: bad.number)
    for total in totals:
        result.events_by_type.update(total.events_by_type)
        result.rounds_checked += total.rounds_checked
        result.tables += total.tables
        result.unboxed_bets += total.unboxed_bets
    result.events = result.events_by_type.total()
    if signer is not None:
        end = max((alert.time for alert in result.alerts), default=datetime.now(UTC))
        result.checkpoint = checkpoint(judge.chains.heads, end, signer)
    return result
