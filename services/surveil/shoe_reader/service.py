"""The shoe-reader service: card-reading shoes' lines (docs/shoe-protocol.md) in, ``baccarat.shoe``
events out, each line published once, even across a crash of the reader.

Lines come over TCP (``SHOE_READER_HOST``, the interface it listens on, default 127.0.0.1: the
floor network's address in a deployment; port ``SHOE_READER_PORT``, default 7007; a connection
may carry one shoe or a gateway's many) or from a capture file (``python -m surveil.shoe_reader --capture FILE``). Each is
parsed strictly; a rejected line goes to ``baccarat.deadletter.shoe-reader`` with the reason. Events are
published keyed by table id, so each table's shoe events stay in order.

Once and only once, across restarts:

- the reader acknowledges a line (``ACK <table> <seq>``, cumulative per table) only after the
  broker acknowledged what it published for it (the event, or the dead letter);
- the device keeps every line until it is acknowledged and, after a reconnect, sends the
  unacknowledged ones again, in order;
- the reader drops a line whose sequence number is not above the last one it handled for that
  table. After a restart it learns the last one it published per table from the tail of
  ``baccarat.shoe`` (event ids are ``<table>:<shoe>:<seq>``): the lines it published but could not
  acknowledge before it died are the last ones it wrote, so reading the two minutes before the
  newest record of each partition finds them.

A shoe numbers its lines under its signature, so the number is the shoe's counter, and the
shoe resends only what was not acknowledged. An acknowledgement is *settled* once it went out
``SETTLE_SECONDS`` (10 s) ago: the shoe has it then, even if the reader died right after sending
it (whose last acknowledgements may be lost with its socket, and their lines rightly resent). A
line at or below the table's settled number is one the shoe never sends again: a replay. It is
refused to the dead letters as a signature failure, which the detectors alert on; a line above
it and at or below the last published is a resend, dropped without a word. The settled numbers
are kept in Redis (``<REDIS_PREFIX>shoe-reader:acknowledged``, the reader's own Redis user), so
they hold across restarts however long a table was quiet; while Redis is away they wait in memory.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import redis
import structlog
import uvloop
from kafka import KafkaConsumer, TopicPartition
from prometheus_client import Counter, Gauge

from ..events import deadletter, topics
from ..events.shoe_protocol import BadLine, Problem, parse_line
from ..events.signing import DeviceKeys
from ..runtime import logs, metrics
from ..runtime.config import Settings
from ..runtime.devices import keys_from_env
from ..runtime.kafka import Publisher

SERVICE = "shoe-reader"
DEADLETTER_TOPIC = topics.deadletter_topic(SERVICE)
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7007
SETTLE_SECONDS = 10.0  # after this long, an acknowledgement sent is one the shoe has
LOOKBACK_MS = 120_000  # how far before the newest record of a partition the restart lookup reads
MAX_LINE = 4096  # bytes the reader buffers looking for a line end; the protocol allows 200

LINES = Counter("surveil_shoe_reader_lines_total", "Shoe lines received, by what became of them.", ["result"])
REJECTED = Counter("surveil_shoe_reader_rejected_lines_total", "Shoe lines rejected to the dead letters, by problem.", ["problem"])
GAPS = Counter("surveil_shoe_reader_sequence_gaps_total", "Shoe lines that skipped sequence numbers of their table.")
CONNECTIONS = Gauge("surveil_shoe_reader_connections", "Shoe connections open now.")

Ack = Callable[[str, int], None]  # called once the line (table, seq) is safely on the broker


class _Id(msgspec.Struct):
    id: str


class Acknowledged:
    """The settled acknowledgement per table, in Redis: a hash under the reader's own namespace
    (``<prefix>shoe-reader:acknowledged``), field table, value the sequence number."""

    def __init__(self, client: redis.Redis, prefix: str = "") -> None:
        self.client = client
        self.key = f"{prefix}{SERVICE}:acknowledged"

    def load(self) -> dict[str, int]:
        """What Redis holds, once it answers (a reader that started without it could not tell a
        replay from a resend)."""
        while True:
            try:
                stored: dict[bytes, bytes] = self.client.hgetall(self.key)  # type: ignore[assignment]
                return {table.decode(): int(seq) for table, seq in stored.items()}
            except (redis.ConnectionError, redis.TimeoutError) as error:
                structlog.get_logger().warning("redis unavailable; waiting for it", service=SERVICE, error=str(error))
                time.sleep(1.0)

    def save(self, acknowledged: dict[str, int]) -> None:
        self.client.hset(self.key, mapping=acknowledged)  # type: ignore[arg-type]


def published_sequences(settings: Settings, lookback_ms: int = LOOKBACK_MS) -> dict[str, int]:
    """The last sequence number published per table, from the tail of ``baccarat.shoe``."""
    topic = settings.topic_prefix + topics.SHOE
    consumer = KafkaConsumer(**settings.kafka_client(), group_id=None, enable_auto_commit=False, isolation_level="read_committed")
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        if not tps:
            return {}
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        begins = consumer.beginning_offsets(tps)
        filled = [tp for tp in tps if ends[tp] > begins[tp]]
        newest = _newest_timestamps(consumer, filled, ends)
        starts = consumer.offsets_for_times({tp: max(newest[tp] - lookback_ms, 0) for tp in filled})
        for tp in filled:
            found = starts.get(tp)
            consumer.seek(tp, found.offset if found is not None else ends[tp] - 1)
        last: dict[str, int] = {}
        for record in _read_until(consumer, filled, ends):
            sequence = _sequence(record)
            if sequence is not None:
                table_id, seq = sequence
                last[table_id] = max(last.get(table_id, 0), seq)
        return last
    finally:
        consumer.close()


_id_decoder = msgspec.json.Decoder(_Id)


def _sequence(record: Any) -> tuple[str, int] | None:
    """The table and the sequence number of a record of the reader's (its event id ends in the
    number); None for any other record: the topic may hold anything, and the reader must start."""
    try:
        table_id = record.key.decode()
        seq = _id_decoder.decode(record.value or b"").id.rpartition(":")[2]
    except (AttributeError, UnicodeDecodeError, msgspec.DecodeError, RecursionError):
        return None
    return (table_id, int(seq)) if seq.isascii() and seq.isdigit() else None


def _newest_timestamps(consumer: KafkaConsumer, tps: list[TopicPartition], ends: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    for tp in tps:
        consumer.seek(tp, ends[tp] - 1)
    newest: dict[TopicPartition, int] = {}
    for record in _read_until(consumer, tps, ends):
        tp = TopicPartition(record.topic, record.partition)
        newest[tp] = max(newest.get(tp, 0), record.timestamp)
    return newest


def _read_until(consumer: KafkaConsumer, tps: list[TopicPartition], ends: dict[TopicPartition, int]) -> Iterable[Any]:
    """Every record from each partition's position up to its end offset."""
    pending = {tp for tp in tps if consumer.position(tp) < ends[tp]}
    while pending:
        for tp, records in consumer.poll(timeout_ms=1000).items():
            for record in records:
                if record.offset < ends[tp]:
                    yield record
            if consumer.position(tp) >= ends[tp]:
                pending.discard(tp)


class LineHandler:
    """Turns each line into a published event or dead letter and drops lines already handled.
    ``ack`` is called, on the producer's thread, once the broker has what the line became."""

    def __init__(
        self,
        publisher: Publisher,
        last_sequences: dict[str, int],
        on_failure: Callable[[Exception], None],
        keys: DeviceKeys | None = None,
        acknowledged: Acknowledged | None = None,
    ) -> None:
        self.publisher = publisher
        self.keys = keys
        self.store = acknowledged
        self.acked = acknowledged.load() if acknowledged is not None else {}  # settled: below it, a replay
        self.sent: dict[str, deque[tuple[float, int]]] = {}  # acknowledgements not settled yet: (when, seq)
        self.unsaved: dict[str, int] = {}  # settled, not yet in Redis
        last = {table: max(seq, last_sequences.get(table, 0)) for table, seq in self.acked.items()}
        self.next_seq = {table_id: seq + 1 for table_id, seq in (last_sequences | last).items()}
        self.on_failure = on_failure
        self.log = structlog.get_logger().bind(service=SERVICE)

    def handle(self, raw: bytes, origin: str, ack: Ack | None = None) -> tuple[str, int] | None:
        """Handle one line; returns its table and sequence number if ``ack`` will be called for
        it, None if not (a garbled line: its table and number cannot be trusted)."""
        try:
            parsed = parse_line(raw, datetime.now(UTC), self.keys)
        except BadLine as error:
            if error.table_id is None or error.seq is None:
                self._reject(raw, origin, error)
                return None
            table_id, seq = error.table_id, error.seq
            if seq <= self.acked.get(table_id, 0):
                future = self._reject(raw, origin, _replayed(table_id, seq, self.acked[table_id]))
            else:
                future = self._reject(raw, origin, error) if self._is_new(table_id, seq) else None
        else:
            table_id, seq = parsed.table_id, parsed.seq
            if seq <= self.acked.get(table_id, 0):
                future = self._reject(raw, origin, _replayed(table_id, seq, self.acked[table_id]))
            else:
                future = self.publisher.publish(parsed.event) if self._is_new(table_id, seq) else None
                if future is not None:
                    LINES.labels("published").inc()
        if future is None:
            LINES.labels("duplicate").inc()
            if ack is not None:
                ack(table_id, seq)
        else:
            if ack is not None:
                future.add_callback(lambda _: ack(table_id, seq))
            future.add_errback(self.on_failure)
        return table_id, seq

    def acknowledged(self, released: dict[str, int], now: float | None = None) -> None:
        """The lines up to ``released`` (per table) were acknowledged to their shoes just now."""
        now = time.monotonic() if now is None else now
        for table, seq in released.items():
            self.sent.setdefault(table, deque()).append((now, seq))

    def settle(self, now: float | None = None) -> None:
        """Acknowledgements sent ``SETTLE_SECONDS`` ago or more are the shoes': from now on any
        line they covered is a replay, also after a restart (kept in Redis)."""
        now = time.monotonic() if now is None else now
        for table, sent in self.sent.items():
            while sent and sent[0][0] <= now - SETTLE_SECONDS:
                seq = sent.popleft()[1]
                if seq > self.acked.get(table, 0):
                    self.acked[table] = self.unsaved[table] = seq
        if self.unsaved and self.store is not None:
            try:
                self.store.save(self.unsaved)
                self.unsaved = {}
            except redis.RedisError as error:  # kept, and tried again at the next settle
                self.log.warning("settled acknowledgements not saved; trying again", error=str(error), tables=len(self.unsaved))

    def _is_new(self, table_id: str, seq: int) -> bool:
        expected = self.next_seq.get(table_id)
        if expected is not None and seq < expected:
            return False
        if expected is not None and seq > expected:
            GAPS.inc()
            self.log.warning("sequence gap", table_id=table_id, expected=expected, got=seq)
        self.next_seq[table_id] = seq + 1
        return True

    def _reject(self, raw: bytes, origin: str, error: BadLine) -> Any:
        LINES.labels("rejected").inc()
        REJECTED.labels(error.problem.value).inc()
        metrics.DEAD_LETTERS.labels(SERVICE, origin.partition(":")[0]).inc()
        self.log.warning("line rejected", origin=origin, reason=error.reason, line=raw[:120].decode("ascii", "replace"))
        kind = deadletter.SIGNATURE if error.problem in (Problem.SIGNATURE, Problem.REPLAY) else deadletter.INVALID
        letter = deadletter.dead_letter(SERVICE, raw, error.reason, origin=origin, key=error.claims, kind=kind)
        return self.publisher.publish_raw(
            DEADLETTER_TOPIC, deadletter.record_key((error.claims or origin).encode()), deadletter.encode(letter)
        )


def _replayed(table_id: str, seq: int, acked: int) -> BadLine:
    reason = (
        f"a replayed line: {table_id}'s shoe has had line {acked} acknowledged for {SETTLE_SECONDS:g} s, and never sends line {seq} again"
    )
    return BadLine(Problem.REPLAY, reason, table_id, seq)


class AckWindow:
    """One connection's lines awaiting the broker, per table, so that acknowledgements go out in
    sequence order even when a dead letter (another topic) is acknowledged before an event.
    Completions come from the producer's thread; they reach the loop in batches, one wake-up and
    one write for all that completed meanwhile."""

    def __init__(
        self, send: Callable[[bytes], None], loop: asyncio.AbstractEventLoop, acknowledged: Callable[[dict[str, int]], None] | None = None
    ) -> None:
        self.send = send
        self.loop = loop
        self.acknowledged = acknowledged  # told what each ACK sent released
        self.pending: dict[str, deque[list[Any]]] = {}  # table -> [seq, done] in arrival order
        self.completed: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def expect(self, table_id: str, seq: int) -> None:
        self.pending.setdefault(table_id, deque()).append([seq, False])

    def complete(self, table_id: str, seq: int) -> None:
        """The line (table, seq) is on the broker; callable from any thread."""
        with self.lock:
            self.completed.append((table_id, seq))
            if len(self.completed) > 1:
                return  # a flush is on its way already
        self.loop.call_soon_threadsafe(self._flush)

    def _flush(self) -> None:
        with self.lock:
            completed, self.completed = self.completed, []
        released: dict[str, int] = {}
        for table_id, seq in completed:
            acked = self.done(table_id, seq)
            if acked is not None:
                released[table_id] = acked
        if released:
            self.send("".join(f"ACK {table_id} {seq}\n" for table_id, seq in released.items()).encode())
            if self.acknowledged is not None:
                self.acknowledged(released)

    def done(self, table_id: str, seq: int) -> int | None:
        """The sequence number the completion of (table, seq) lets the reader acknowledge (all of
        the table's lines up to it are on the broker), or None if an earlier one is not yet."""
        window = self.pending.get(table_id)
        if not window:
            return None
        for entry in window:
            if entry[0] == seq:
                entry[1] = True
                break
        acked = None
        while window and window[0][1]:
            acked = window.popleft()[0]
        return acked


async def serve_tcp(
    handler: LineHandler, port: int, stop: asyncio.Event, ready: Callable[[int], None] | None = None, host: str = DEFAULT_HOST
) -> None:
    """Accept shoe connections on ``host``:``port`` until ``stop`` is set."""
    loop = asyncio.get_running_loop()
    log = structlog.get_logger().bind(service=SERVICE)

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, peer_port = writer.get_extra_info("peername")[:2]
        origin = f"tcp://{host}:{peer_port}"
        window = AckWindow(lambda data: None if writer.is_closing() else writer.write(data), loop, handler.acknowledged)
        CONNECTIONS.inc()
        log.info("shoe connected", origin=origin)
        try:
            while True:
                line = await _read_line(reader)
                if line is None:
                    break
                # Completions reach the window through the loop, so after ``expect`` below.
                expected = handler.handle(line, origin, window.complete)
                if expected is not None:
                    window.expect(*expected)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            CONNECTIONS.dec()
            log.info("shoe disconnected", origin=origin)
            writer.close()

    server = await asyncio.start_server(connection, host=host, port=port, limit=MAX_LINE)
    if ready is not None:
        ready(server.sockets[0].getsockname()[1])
    async with server:
        await stop.wait()


async def _read_line(reader: asyncio.StreamReader) -> bytes | None:
    """The next line, with its end; a line cut off by the end of the connection, or one too
    long to buffer, comes back as it is, to be rejected. None at the end."""
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as error:
        return error.partial or None
    except asyncio.LimitOverrunError as error:
        line = await reader.readexactly(error.consumed)
        while True:  # skip the rest of the overlong line
            try:
                await reader.readuntil(b"\n")
                break
            except asyncio.LimitOverrunError as more:
                await reader.readexactly(more.consumed)
        return line


def replay_capture(handler: LineHandler, path: Path) -> None:
    """Every line of a capture file, as if a shoe had sent it."""
    with open(path, "rb") as capture:
        for number, line in enumerate(capture, start=1):
            handler.handle(line, f"capture:{path}:{number}")


def main(capture: Path | None = None) -> None:
    settings = Settings.from_env(SERVICE)
    log = logs.configure(SERVICE, settings.log_level)
    metrics.serve(settings.metrics_port)
    failed = threading.Event()

    def on_failure(error: Exception) -> None:
        # The device holds the lines not acknowledged; exit so that it resends them to a fresh
        # reader, which learns from the topic what was published.
        log.error("publishing failed; stopping", error=str(error))
        failed.set()

    keys = keys_from_env(SERVICE, kinds=("shoe",))  # its shoes' keys only
    publisher = Publisher(settings)
    last = published_sequences(settings)
    # A Redis that hangs must not hold the loop the shoes' lines come in on for long.
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
    acknowledged = Acknowledged(client, settings.redis_prefix)
    handler = LineHandler(publisher, last, on_failure, keys, acknowledged)
    log.info("last published and acknowledged sequences read", published=len(last), acknowledged=len(handler.acked))
    if capture is not None:
        replay_capture(handler, capture)
        publisher.flush()
        publisher.close()
        raise SystemExit(1 if failed.is_set() else 0)
    host, port = os.environ.get("SHOE_READER_HOST", DEFAULT_HOST), int(os.environ.get("SHOE_READER_PORT", DEFAULT_PORT))
    uvloop.run(_run_tcp(handler, host, port, failed, log))  # libuv's loop: a wake costs it less CPU
    publisher.flush()
    publisher.close()
    if failed.is_set():
        raise SystemExit(1)


async def _run_tcp(handler: LineHandler, host: str, port: int, failed: threading.Event, log: Any) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    async def watch_failure() -> None:
        while not failed.is_set():
            await asyncio.sleep(0.2)
        stop.set()

    async def settle() -> None:
        while True:
            await asyncio.sleep(1.0)
            handler.settle()

    watcher = asyncio.create_task(watch_failure())
    settler = asyncio.create_task(settle())
    await serve_tcp(handler, port, stop, ready=lambda bound: log.info("listening", host=host, port=bound), host=host)
    watcher.cancel()
    settler.cancel()
