"""The shoe-reader service without a broker: what becomes of each line, acknowledgements in order
and only once the broker has the line, resending after a lost connection (with the simulator's
gateway) without publishing anything twice, and capture files."""

from __future__ import annotations

import asyncio
import threading
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import structlog
import structlog.testing
from prometheus_client import REGISTRY

from surveil.events import codec, deadletter, topics
from surveil.events import models as m
from surveil.events.shoe_protocol import Kind, format_line
from surveil.shoe_reader.service import AckWindow, LineHandler, replay_capture, serve_tcp
from surveil.sim.live import ShoeGateway

AT = datetime(2026, 11, 29, 11, 0, tzinfo=UTC)


class Future:
    """A producer send's future, resolved when the test says the broker acknowledged."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[Any], None]] = []
        self.errbacks: list[Callable[[Exception], None]] = []

    def add_callback(self, callback: Callable[[Any], None]) -> Future:
        self.callbacks.append(callback)
        return self

    def add_errback(self, errback: Callable[[Exception], None]) -> Future:
        self.errbacks.append(errback)
        return self

    def succeed(self) -> None:
        for callback in self.callbacks:
            callback(None)

    def fail(self, error: Exception) -> None:
        for errback in self.errbacks:
            errback(error)


class Broker:
    """Stands in for ``runtime.kafka.Publisher``; records what was sent."""

    topic_prefix = ""

    def __init__(self, acknowledge_at_once: bool = False) -> None:
        self.sent: list[tuple[str, bytes, bytes, Future]] = []
        self.acknowledge_at_once = acknowledge_at_once

    def publish(self, event: m.Event) -> Future:
        return self.publish_raw(event.topic, event.subject.encode(), codec.encode(event))

    def publish_raw(self, topic: str, key: bytes, value: bytes) -> Future:
        future = Future()
        self.sent.append((topic, key, value, future))
        if self.acknowledge_at_once:
            asyncio.get_running_loop().call_soon(future.succeed)
        return future

    def events(self) -> list[m.Event]:
        return [codec.decode(value) for topic, _, value, _ in self.sent if topic == topics.SHOE]

    def dead_letters(self) -> list[deadletter.DeadLetter]:
        return [deadletter.decode(value) for topic, _, value, _ in self.sent if topic == topics.deadletter_topic("shoe-reader")]


def card(seq: int, index: int | None = None, table: str = "T07") -> bytes:
    return format_line(table, seq, AT, Kind.CARD, "S1", index or seq, "AS", "down")


def signed(body: str) -> bytes:
    return f"{body} *{zlib.crc32(body.encode()):08X}\n".encode()


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def broker() -> Broker:
    return Broker()


@pytest.fixture
def failures() -> list[Exception]:
    return []


@pytest.fixture
def handler(broker: Broker, failures: list[Exception]) -> LineHandler:
    return LineHandler(broker, {}, failures.append)  # type: ignore[arg-type]


# ---- what becomes of a line ---------------------------------------------------------------------


def test_a_line_is_published_and_acknowledged_once_the_broker_has_it(handler: LineHandler, broker: Broker) -> None:
    acks: list[tuple[str, int]] = []
    published = metric("surveil_shoe_reader_lines_total", result="published")
    assert handler.handle(card(1), "tcp://10.0.0.7:4000", lambda *a: acks.append(a)) == ("T07", 1)
    (event,) = broker.events()
    assert (event.id, event.subject) == ("T07:S1:1", "T07")
    assert broker.sent[0][1] == b"T07"  # keyed by table
    assert acks == []
    broker.sent[0][3].succeed()
    assert acks == [("T07", 1)]
    assert metric("surveil_shoe_reader_lines_total", result="published") == published + 1


def test_a_line_sent_again_is_dropped_and_acknowledged_again(handler: LineHandler, broker: Broker) -> None:
    acks: list[tuple[str, int]] = []
    duplicates = metric("surveil_shoe_reader_lines_total", result="duplicate")
    for seq in (1, 2, 1, 2):
        handler.handle(card(seq), "tcp://peer", lambda *a: acks.append(a))
    assert [e.id for e in broker.events()] == ["T07:S1:1", "T07:S1:2"]
    assert acks == [("T07", 1), ("T07", 2)]  # the resent ones; the others wait for the broker
    assert metric("surveil_shoe_reader_lines_total", result="duplicate") == duplicates + 2


def test_sequence_numbers_are_per_table(handler: LineHandler, broker: Broker) -> None:
    handler.handle(card(5, table="T01"), "tcp://peer")
    handler.handle(card(1, table="T02"), "tcp://peer")
    assert [e.id for e in broker.events()] == ["T01:S1:5", "T02:S1:1"]


def test_a_gap_is_published_and_counted(handler: LineHandler, broker: Broker) -> None:
    gaps = metric("surveil_shoe_reader_sequence_gaps_total")
    handler.handle(card(1), "tcp://peer")
    handler.handle(card(4), "tcp://peer")
    assert len(broker.events()) == 2
    assert metric("surveil_shoe_reader_sequence_gaps_total") == gaps + 1
    handler.handle(card(3), "tcp://peer")  # too late: it would break the table's order
    assert len(broker.events()) == 2


def test_after_a_restart_the_last_published_sequences_are_not_published_again(broker: Broker) -> None:
    handler = LineHandler(broker, {"T07": 2}, lambda error: None)  # type: ignore[arg-type]
    for seq in (1, 2, 3):
        handler.handle(card(seq), "tcp://peer")
    assert [e.id for e in broker.events()] == ["T07:S1:3"]


def test_a_garbled_line_goes_to_the_dead_letters_and_is_never_acknowledged(handler: LineHandler, broker: Broker) -> None:
    rejected = metric("surveil_shoe_reader_rejected_lines_total", problem="checksum")
    dead = metric("surveil_dead_letters_total", service="shoe-reader", origin="tcp")
    garbled = card(1).replace(b"AS", b"AH")
    assert handler.handle(garbled, "tcp://10.0.0.7:4000", lambda *a: pytest.fail("acknowledged")) is None
    (letter,) = broker.dead_letters()
    assert letter.payload == garbled
    assert letter.origin == "tcp://10.0.0.7:4000"
    assert letter.service == "shoe-reader"
    assert letter.reason.startswith("checksum ") and letter.reason.endswith(
        "does not match the line (CRC-32 " + letter.reason[-18:-10] + "): garbled"
    )
    assert broker.sent[0][1] == b"tcp://10.0.0.7:4000"
    broker.sent[0][3].succeed()
    assert metric("surveil_shoe_reader_rejected_lines_total", problem="checksum") == rejected + 1
    assert metric("surveil_dead_letters_total", service="shoe-reader", origin="tcp") == dead + 1
    assert handler.handle(card(1), "tcp://peer") == ("T07", 1)  # sent again intact: published
    assert len(broker.events()) == 1


def test_a_line_with_a_bad_field_is_dead_lettered_acknowledged_and_its_number_used(handler: LineHandler, broker: Broker) -> None:
    acks: list[tuple[str, int]] = []
    bad = signed("SHOE1 T07 1 - CARD S1 1 1H down")
    assert handler.handle(bad, "tcp://peer", lambda *a: acks.append(a)) == ("T07", 1)
    (letter,) = broker.dead_letters()
    assert letter.reason == "'1H' is not a card: expected rank (A 2-10 J Q K) + suit (S H D C)"
    assert (letter.key, broker.sent[0][1]) == ("T07", b"T07")
    broker.sent[0][3].succeed()
    assert acks == [("T07", 1)]
    handler.handle(bad, "tcp://peer", lambda *a: acks.append(a))  # resent: already handled
    assert len(broker.dead_letters()) == 1


class Remembered:
    """Stands in for the Redis hash of acknowledged sequence numbers."""

    def __init__(self, acknowledged: dict[str, int]) -> None:
        self.saved = dict(acknowledged)

    def load(self) -> dict[str, int]:
        return dict(self.saved)

    def save(self, acknowledged: dict[str, int]) -> None:
        self.saved |= acknowledged


def test_a_line_acknowledged_before_a_restart_is_a_replay_refused_for_an_alert(broker: Broker, failures: list[Exception]) -> None:
    store = Remembered({"T07": 3})  # settled before the restart
    handler = LineHandler(broker, {"T07": 6}, failures.append, None, store)  # type: ignore[arg-type]
    acks: list[tuple[str, int]] = []
    assert handler.handle(card(2), "tcp://peer", lambda *a: acks.append(a)) == ("T07", 2)
    (letter,) = broker.dead_letters()
    assert (letter.kind, letter.key, letter.payload) == ("signature", "T07", card(2))
    assert letter.reason == "a replayed line: T07's shoe has had line 3 acknowledged for 10 s, and never sends line 2 again"
    broker.sent[0][3].succeed()
    assert acks == [("T07", 2)]
    # Published, but its acknowledgement maybe lost with the reader that died: a resend, dropped quietly.
    assert handler.handle(card(5), "tcp://peer", lambda *a: acks.append(a)) == ("T07", 5)
    assert (len(broker.dead_letters()), broker.events(), acks[-1]) == (1, [], ("T07", 5))
    assert handler.handle(card(7), "tcp://peer") == ("T07", 7)
    assert [e.id for e in broker.events()] == ["T07:S1:7"]


def test_an_acknowledgement_settles_after_ten_seconds_and_is_kept_in_redis(broker: Broker, failures: list[Exception]) -> None:
    store = Remembered({})
    handler = LineHandler(broker, {}, failures.append, None, store)  # type: ignore[arg-type]
    handler.acknowledged({"T07": 4, "T08": 1}, now=100.0)
    handler.acknowledged({"T07": 2}, now=101.0)  # a later connection's older acknowledgement moves nothing back
    handler.settle(now=109.0)
    assert (handler.acked, store.saved) == ({}, {})  # not yet: the shoe may not have it
    handler.settle(now=110.0)
    assert store.saved == {"T07": 4, "T08": 1}
    handler.settle(now=111.0)
    assert store.saved == {"T07": 4, "T08": 1} and failures == []


def test_an_acknowledgement_goes_out_before_it_is_remembered() -> None:
    sent: list[bytes] = []
    remembered: list[dict[str, int]] = []
    window = AckWindow(sent.append, asyncio.new_event_loop(), lambda released: remembered.append(dict(released)) or None)
    window.expect("T1", 1)
    window.completed.append(("T1", 1))
    window._flush()
    assert (sent, remembered) == ([b"ACK T1 1\n"], [{"T1": 1}])


def test_a_failed_publish_is_reported(handler: LineHandler, broker: Broker, failures: list[Exception]) -> None:
    handler.handle(card(1), "tcp://peer", lambda *a: pytest.fail("acknowledged"))
    error = TimeoutError("delivery timed out")
    broker.sent[0][3].fail(error)
    assert failures == [error]


# ---- acknowledgements in order --------------------------------------------------------------------


def test_acknowledgements_go_out_in_sequence_order_per_table() -> None:
    window = AckWindow(lambda data: None, asyncio.new_event_loop())
    for table, seq in (("T1", 1), ("T1", 2), ("T2", 7), ("T1", 3)):
        window.expect(table, seq)
    assert window.done("T1", 2) is None  # a dead letter (another partition) acknowledged before line 1
    assert window.done("T2", 7) == 7
    assert window.done("T1", 1) == 2
    assert window.done("T1", 3) == 3


def test_completions_from_the_producer_thread_are_written_together() -> None:
    async def scenario() -> list[bytes]:
        sent: list[bytes] = []
        window = AckWindow(sent.append, asyncio.get_running_loop())
        for seq in range(1, 6):
            window.expect("T1", seq)
        producer = threading.Thread(target=lambda: [window.complete("T1", seq) for seq in (2, 1, 3, 5)])
        producer.start()
        producer.join()
        await asyncio.sleep(0.05)
        return sent

    assert asyncio.run(scenario()) == [b"ACK T1 3\n"]  # one write, the latest only; 5 waits for 4


# ---- over TCP, with the simulator's gateway ---------------------------------------------------------


async def start_reader(handler: LineHandler) -> tuple[int, asyncio.Event, asyncio.Task[None]]:
    stop = asyncio.Event()
    bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve_tcp(handler, 0, stop, ready=bound.set_result))
    return await bound, stop, task


def test_the_reader_listens_on_the_configured_interface_loopback_by_default(handler: LineHandler) -> None:
    async def bound_to(**host: str) -> str:
        stop = asyncio.Event()
        where: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        original = asyncio.start_server

        async def start_server(*args: Any, **kwargs: Any) -> asyncio.Server:
            server = await original(*args, **kwargs)
            where.set_result(server.sockets[0].getsockname()[0])
            return server

        asyncio.start_server = start_server  # type: ignore[assignment]
        try:
            task = asyncio.create_task(serve_tcp(handler, 0, stop, **host))  # type: ignore[arg-type]
            address = await where
        finally:
            asyncio.start_server = original
        stop.set()
        await task
        return address

    assert asyncio.run(bound_to()) == "127.0.0.1"  # not 0.0.0.0: every interface of the host
    assert asyncio.run(bound_to(host="0.0.0.0")) == "0.0.0.0"


def test_lines_over_tcp_are_published_once_and_acknowledged(handler: LineHandler) -> None:
    async def scenario() -> Broker:
        broker = Broker(acknowledge_at_once=True)
        handler.publisher = broker  # type: ignore[assignment]
        port, stop, server = await start_reader(handler)
        gateway = ShoeGateway("127.0.0.1", port)
        for seq in range(1, 51):
            await gateway.send("T07", seq, card(seq))
        await gateway.wait_acknowledged(timeout=10)
        await gateway.close()
        stop.set()
        await server
        return broker

    broker = asyncio.run(scenario())
    assert [e.id for e in broker.events()] == [f"T07:S1:{seq}" for seq in range(1, 51)]


def test_after_a_lost_connection_the_gateway_resends_and_nothing_is_published_twice(handler: LineHandler, broker: Broker) -> None:
    """The reader goes away with lines published but not acknowledged, and lines not even read;
    the gateway resends all it holds to the next reader, which drops what it already published."""

    async def scenario() -> ShoeGateway:
        port, stop, server = await start_reader(handler)
        gateway = ShoeGateway("127.0.0.1", port)
        for seq in range(1, 21):
            await gateway.send("T07", seq, card(seq))
        while len(broker.sent) < 20:
            await asyncio.sleep(0.01)
        for *_, future in broker.sent[:10]:
            future.succeed()  # the broker has 20; the gateway hears of 10
        while gateway.pending > 10:
            await asyncio.sleep(0.01)
        stop.set()
        await server
        gateway._lost()  # the reader's end closed
        broker.acknowledge_at_once = True
        for *_, future in broker.sent[10:]:
            future.succeed()
        port2, stop2, server2 = await start_reader_on(handler, port)
        for seq in range(21, 31):
            await gateway.send("T07", seq, card(seq))
        await gateway.wait_acknowledged(timeout=10)
        await gateway.close()
        stop2.set()
        await server2
        return gateway

    with structlog.testing.capture_logs() as logged:
        gateway = asyncio.run(scenario())
    assert [e.id for e in broker.events()] == [f"T07:S1:{seq}" for seq in range(1, 31)]
    assert gateway.reconnects == 1
    resent = [entry for entry in logged if entry["event"] == "reconnected; resending unacknowledged lines"]
    assert [entry["lines"] for entry in resent] == [11]  # 11-20 and 21, whose send reconnected; not at the first connection


async def start_reader_on(handler: LineHandler, port: int) -> tuple[int, asyncio.Event, asyncio.Task[None]]:
    stop = asyncio.Event()
    bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve_tcp(handler, port, stop, ready=bound.set_result))
    return await bound, stop, task


def test_an_overlong_line_and_a_line_cut_off_by_the_connection_end_are_rejected(handler: LineHandler, broker: Broker) -> None:
    async def scenario() -> None:
        broker.acknowledge_at_once = True
        port, stop, server = await start_reader(handler)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"X" * 10_000 + b"\n" + card(1) + card(2)[:20])
        await writer.drain()
        assert await reader.readline() == b"ACK T07 1\n"
        writer.close()
        await asyncio.sleep(0.2)
        stop.set()
        await server

    asyncio.run(scenario())
    letters = broker.dead_letters()
    assert letters[0].reason.startswith("line of ") and letters[0].reason.endswith(" bytes; at most 270")
    assert letters[1].reason == "no checksum: a line must end with ' *' and 8 hex digits (CRC-32)"
    assert [e.id for e in broker.events()] == ["T07:S1:1"]


def test_a_capture_file_is_published_line_by_line(handler: LineHandler, broker: Broker, tmp_path: Path) -> None:
    capture = tmp_path / "t07.shoe"
    capture.write_bytes(card(1) + b"garbage\n" + card(2) + card(2))
    replay_capture(handler, capture)
    assert [e.id for e in broker.events()] == ["T07:S1:1", "T07:S1:2"]
    (letter,) = broker.dead_letters()
    assert letter.origin == f"capture:{capture}:2"
