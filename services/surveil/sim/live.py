"""The floor played live: the shoes' lines to the shoe-reader over TCP, the console and sensor
inputs to ``baccarat.inputs`` on Kafka, at the table's pace or faster.

The shoes speak through one ``ShoeGateway`` connection, as a floor's shoe gateway would
(docs/shoe-protocol.md): every line is kept until the reader acknowledges it, and after a lost
connection (the reader restarted) the unacknowledged lines are sent again, in order.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from ..events.shoe_protocol import signed_line
from ..events.signing import DeviceKeys
from ..runtime.kafka import Publisher
from .floor import Floor
from .injections import Label
from .table import ROUND_SECONDS, START, Action, ShoeLine, TableInput, Truth

RECONNECT_SECONDS = (0.1, 2.0)  # first and longest wait between connection attempts
TICK_SECONDS = 0.005  # the play's loop wakes at most this often; what is due goes out together
BATCH_MOST = 256  # actions sent before the loop lets others in, when they are all due


class ShoeGateway:
    """Lines to the shoe-reader, each kept until acknowledged (``ACK <table> <seq>``)."""

    def __init__(self, host: str, port: int, give_up_after: float = 120.0) -> None:
        self.host, self.port = host, port
        self.give_up_after = give_up_after
        self.unacked: dict[str, deque[tuple[int, bytes]]] = {}
        self.unsent: list[bytes] = []  # written, not yet handed to the connection
        self.writer: asyncio.StreamWriter | None = None
        self.acks: asyncio.Task[None] | None = None
        self.changed = asyncio.Event()  # an acknowledgement arrived or the connection dropped
        self.reconnects = 0
        self.log = structlog.get_logger().bind(service="floor-simulator")

    @property
    def pending(self) -> int:
        return sum(len(lines) for lines in self.unacked.values())

    async def send(self, table_id: str, seq: int, line: bytes) -> None:
        """One line, sent now."""
        self.write(table_id, seq, line)
        await self.drain()

    def write(self, table_id: str, seq: int, line: bytes) -> None:
        """Keep ``line`` until it is acknowledged; the next ``drain`` sends it, with the others
        written since, in one write to the connection."""
        self.unacked.setdefault(table_id, deque()).append((seq, line))
        self.unsent.append(line)

    async def drain(self) -> None:
        """Send what was written (connecting if need be, and then resending what is not
        acknowledged), and wait until the connection has taken it."""
        writer = await self._connected()
        writer.writelines(self.unsent)
        self.unsent.clear()
        try:
            await writer.drain()
        except ConnectionError:
            self._lost()  # resent, with the others not acknowledged, on the next connection

    async def wait_acknowledged(self, timeout: float) -> None:
        """Until the reader acknowledged every line (reconnecting and resending as needed)."""
        async with asyncio.timeout(timeout):
            while self.pending:
                await self._connected()
                self.changed.clear()
                await self.changed.wait()

    async def close(self) -> None:
        if self.acks is not None:
            self.acks.cancel()
        if self.writer is not None:
            self.writer.close()

    async def _connected(self) -> asyncio.StreamWriter:
        if self.writer is not None:
            return self.writer
        delay, waited = RECONNECT_SECONDS[0], 0.0
        while True:
            try:
                reader, writer = await asyncio.open_connection(self.host, self.port)
                break
            except OSError:
                if waited > self.give_up_after:
                    raise
                await asyncio.sleep(delay)
                waited += delay
                delay = min(delay * 2, RECONNECT_SECONDS[1])
        reconnected = self.acks is not None
        if reconnected:
            self.reconnects += 1
        self.writer = writer
        self.acks = asyncio.create_task(self._read_acks(reader, writer))
        self.unsent.clear()  # they are among the unacknowledged lines, all resent below
        resend = [line for lines in self.unacked.values() for _, line in lines]
        if resend:
            if reconnected:
                self.log.info("reconnected; resending unacknowledged lines", lines=len(resend))
            writer.writelines(resend)
        return writer

    async def _read_acks(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async for raw in reader:
                _, table_id, seq = raw.decode().split()
                lines = self.unacked.get(table_id)
                while lines and lines[0][0] <= int(seq):
                    lines.popleft()
                self.changed.set()
        except ConnectionError:
            pass
        if self.writer is writer:
            self._lost()

    def _lost(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.writer = None
        self.changed.set()


@dataclass
class LiveRun:
    lines: int = 0
    inputs: int = 0
    labels: int = 0
    reconnects: int = 0
    most_behind: float = 0.0  # seconds an action went out after its time at worst (a tick's wait included)


async def play_live(
    floor: Floor,
    publisher: Publisher,
    gateway: ShoeGateway,
    pace: float,
    on_label: Callable[[Label], None] | None = None,
    on_progress: Callable[[LiveRun], None] | None = None,
    run: LiveRun | None = None,
    keys: DeviceKeys | None = None,
    origin: float | None = None,
    tick: float = TICK_SECONDS,
) -> LiveRun:
    """Play ``floor``: ``pace`` wall-clock seconds per simulated round (``ROUND_SECONDS`` of
    table time), or as fast as the reader and broker take it when ``pace`` is 0. ``run`` counts
    what was sent, also for a caller that stops the play before the floor is over. With ``keys``
    the shoes sign their lines (and ``publisher``, made with the same keys, the inputs). ``origin``
    is the wall-clock time (``time.time()``) the floor's ``START`` stands for, so that every line
    goes out at its event time; by default, now.

    The loop wakes at most once a ``tick`` (seconds) and sends what is due together: one write
    to the reader and the producer's records handed over at once, rather than a wake of each for
    every action of a busy floor. An action goes out at its time or up to a tick after it, never
    before."""
    run = run or LiveRun()
    scale = pace / ROUND_SECONDS
    # time.monotonic, not the loop's clock: uvloop's counts whole milliseconds and rounds its sleeps.
    began = time.monotonic() - (time.time() - origin if origin is not None else 0.0)
    due: list[Action] = []
    next_wake = 0.0  # the loop's earliest next wake: a tick after the last
    for number, action in enumerate(floor.actions()):
        at = began + (action.time - START).total_seconds() * scale
        if at > time.monotonic():
            await _send(due, publisher, gateway, run, on_label, keys)
            while (wait := max(at, next_wake) - time.monotonic()) > 0:  # a sleep may end a little early
                await asyncio.sleep(wait)
            next_wake = time.monotonic() + tick
        elif len(due) >= BATCH_MOST:  # as fast as it goes, or behind
            await _send(due, publisher, gateway, run, on_label, keys)
            await asyncio.sleep(0)  # let acknowledgements (and cancellation) in
        if scale:
            run.most_behind = max(run.most_behind, time.monotonic() - at)
        due.append(action)
        if on_progress is not None and number % 1000 == 0:
            on_progress(run)
    await _send(due, publisher, gateway, run, on_label, keys)
    publisher.flush()
    await gateway.wait_acknowledged(timeout=gateway.give_up_after)
    run.reconnects = gateway.reconnects
    return run


async def _send(
    actions: list[Action],
    publisher: Publisher,
    gateway: ShoeGateway,
    run: LiveRun,
    on_label: Callable[[Label], None] | None,
    keys: DeviceKeys | None,
) -> None:
    """Send ``actions`` (and empty the list)."""
    lines = run.lines
    for action in actions:
        if isinstance(action, ShoeLine):
            gateway.write(action.table_id, action.seq, signed_line(action.line, keys) if keys else action.line)
            run.lines += 1
        elif isinstance(action, TableInput):
            publisher.publish(action.event)
            run.inputs += 1
        elif isinstance(action, Truth):
            run.labels += 1
            if on_label is not None:
                on_label(action.label)
    actions.clear()
    if run.lines > lines:
        await gateway.drain()
