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
from .table import ROUND_SECONDS, START, ShoeLine, TableInput, Truth

RECONNECT_SECONDS = (0.1, 2.0)  # first and longest wait between connection attempts


class ShoeGateway:
    """Lines to the shoe-reader, each kept until acknowledged (``ACK <table> <seq>``)."""

    def __init__(self, host: str, port: int, give_up_after: float = 120.0) -> None:
        self.host, self.port = host, port
        self.give_up_after = give_up_after
        self.unacked: dict[str, deque[tuple[int, bytes]]] = {}
        self.writer: asyncio.StreamWriter | None = None
        self.acks: asyncio.Task[None] | None = None
        self.changed = asyncio.Event()  # an acknowledgement arrived or the connection dropped
        self.reconnects = 0
        self.log = structlog.get_logger().bind(service="floor-simulator")

    @property
    def pending(self) -> int:
        return sum(len(lines) for lines in self.unacked.values())

    async def send(self, table_id: str, seq: int, line: bytes) -> None:
        writer = await self._connected()
        self.unacked.setdefault(table_id, deque()).append((seq, line))
        try:
            writer.write(line)
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
        if self.acks is not None:
            self.reconnects += 1
        self.writer = writer
        self.acks = asyncio.create_task(self._read_acks(reader, writer))
        resend = [line for lines in self.unacked.values() for _, line in lines]
        if resend:
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
    most_behind: float = 0.0  # seconds the simulator fell behind its pace at worst


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
) -> LiveRun:
    """Play ``floor``: ``pace`` wall-clock seconds per simulated round (``ROUND_SECONDS`` of
    table time), or as fast as the reader and broker take it when ``pace`` is 0. ``run`` counts
    what was sent, also for a caller that stops the play before the floor is over. With ``keys``
    the shoes sign their lines (and ``publisher``, made with the same keys, the inputs). ``origin``
    is the wall-clock time (``time.time()``) the floor's ``START`` stands for, so that every line
    goes out at its event time; by default, now."""
    run = run or LiveRun()
    loop = asyncio.get_running_loop()
    scale = pace / ROUND_SECONDS
    began = loop.time() - (time.time() - origin if origin is not None else 0.0)
    for number, action in enumerate(floor.actions()):
        delay = began + (action.time - START).total_seconds() * scale - loop.time() if scale else 0.0
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            run.most_behind = max(run.most_behind, -delay)
            if number % 256 == 0:
                await asyncio.sleep(0)  # let acknowledgements (and cancellation) in
        if isinstance(action, ShoeLine):
            await gateway.send(action.table_id, action.seq, signed_line(action.line, keys) if keys else action.line)
            run.lines += 1
        elif isinstance(action, TableInput):
            publisher.publish(action.event)
            run.inputs += 1
        elif isinstance(action, Truth):
            run.labels += 1
            if on_label is not None:
                on_label(action.label)
        if on_progress is not None and number % 1000 == 0:
            on_progress(run)
    publisher.flush()
    await gateway.wait_acknowledged(timeout=gateway.give_up_after)
    run.reconnects = gateway.reconnects
    return run
