"""A request on an aiokafka connection whose transport is already closed raises aiokafka's own
connection error, on uvloop's loop as on asyncio's. Without the refusal uvloop raised a
RuntimeError there, which aiokafka's metadata task does not catch (after a broker's kill -9 the
detectors' consumer lost that task and never found its group coordinator again), and asyncio's
dropped the request, to be answered by its timeout (40 s)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import uvloop
from aiokafka.conn import AIOKafkaConnection
from aiokafka.errors import KafkaConnectionError, KafkaError
from aiokafka.protocol.metadata import MetadataRequest

import surveil.anomaly_detection.transport  # noqa: F401  (installs the refusal)

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {"uvloop": uvloop.new_event_loop, "asyncio": asyncio.new_event_loop}


async def request_after_reset() -> tuple[BaseException | None, bool]:
    """What a metadata request raises on a connection whose transport closed under it, as a reset
    closes it before the connection's read task sees it; and whether the connection still says
    it is connected."""
    server = await asyncio.start_server(lambda reader, writer: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    connection = AIOKafkaConnection("127.0.0.1", port)

    async def no_version_lookup() -> None:  # the server speaks no Kafka
        connection._versions = {MetadataRequest.API_KEY: (0, 1)}

    connection._do_version_lookup = no_version_lookup
    try:
        await connection.connect()
        connection._writer.transport.abort()
        await asyncio.sleep(0)  # uvloop closes the transport's handle at its next turn
        assert connection._writer is not None, "the read task closed the connection first: no window left to test"
        try:
            connection.send(MetadataRequest([]))
        except BaseException as raised:  # noqa: BLE001  (what it raises is the finding)
            return raised, connection.connected()
        return None, connection.connected()
    finally:
        connection.close()
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_request_on_a_closed_transport_raises_a_kafka_connection_error_and_closes_the_connection(loop_name: str) -> None:
    loop = LOOPS[loop_name]()
    try:
        raised, connected = loop.run_until_complete(request_after_reset())
    finally:
        loop.close()
    assert isinstance(raised, KafkaConnectionError), f"{loop_name}: {raised!r}"
    assert isinstance(raised, KafkaError)  # what aiokafka's metadata task catches
    assert "closed" in str(raised)
    assert not connected
