"""Spoofed device messages on the real broker: a shoe line and a console input that do not carry
their device's signature are refused (nothing reaches the shoe or table topics), dead-lettered
with kind "signature", and raised as DEVICE_SIGNATURE alerts for the table they claim."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import subprocess
import time
from datetime import UTC, datetime
from typing import Any

import pytest
import redis
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError

from integration.deployment import Deployment
from support.processes import SURVEIL
from surveil.events import codec, deadletter, topics
from surveil.events import models as m
from surveil.events.shoe_protocol import Kind, format_line, signed_line
from surveil.events.signing import DeviceKeys
from surveil.runtime.access import FLOOR_SIMULATOR, SETTLEMENT_SERVICE
from surveil.runtime.config import Settings, kafka_client_config
from surveil.runtime.kafka import Publisher
from surveil.sim.live import ShoeGateway

NOW = datetime.now(UTC)
FORGED = b"a key the forger made up, 32 byte"  # not the key issued for any device


def read_raw(deployment: Deployment, topic: str, expected: int, timeout: float = 60) -> list[bytes]:
    consumer = KafkaConsumer(
        **kafka_client_config(deployment.bootstrap), group_id=None, isolation_level="read_committed", auto_offset_reset="earliest"
    )
    name = deployment.topic(topic)
    consumer.assign([TopicPartition(name, p) for p in consumer.partitions_for_topic(name) or ()])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(values) < expected:
        for records in consumer.poll(timeout_ms=500).values():
            values += [r.value for r in records]
    consumer.close()
    return values


def read_alerts(deployment: Deployment, expected: int, timeout: float = 60) -> list[m.AlertRaised]:
    """The alerts on the deployment's alerts topic (not its checkpoints), once ``expected`` of
    them are there, or at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        events = [codec.decode(v) for v in read_raw(deployment, topics.ALERTS, 10**9, timeout=3)]
        alerts = [e for e in events if isinstance(e, m.AlertRaised)]
        if len(alerts) >= expected or time.monotonic() > deadline:
            return alerts


def test_spoofed_shoe_lines_and_inputs_are_refused_and_alerted(deployment: Deployment) -> None:
    for service in ("shoe-reader", "table-controller", "anomaly-detection"):
        deployment.start(service)
    for device in ("shoe/T09", "console/T09"):
        deployment.key_store.issue(device)  # the real devices have keys; the forger has others
    forger = DeviceKeys({"shoe/T09": FORGED, "console/T09": FORGED})
    with socket.create_connection(("127.0.0.1", deployment.reader_port)) as shoe:
        shoe.sendall(signed_line(format_line("T09", 1, NOW, Kind.START, "S1", 8, "manual"), forger))
        shoe.sendall(format_line("T09", 2, NOW, Kind.CARD, "S1", 1, "9H", "down"))  # unsigned
        time.sleep(2)
    settings = dataclasses.replace(
        Settings.from_env(FLOOR_SIMULATOR), kafka_bootstrap=deployment.bootstrap, topic_prefix=deployment.topic_prefix
    )
    if deployment.access is not None:
        settings = deployment.access.settings(settings, FLOOR_SIMULATOR)
    publisher = Publisher(settings, forger)
    bet = m.BetPlaceInput(table_id="T09", bet_id="B1", patron_id="P1", seat="1", spot="banker", amount=100_000)  # type: ignore[arg-type]
    publisher.publish(codec.make(m.BetPlace, bet, id="spoof-1", source="console/T09", time=NOW))
    publisher.flush()
    publisher.close()

    letters = [
        deadletter.decode(v)
        for service, expected in (("shoe-reader", 2), ("table-controller", 1))
        for v in read_raw(deployment, topics.deadletter_topic(service), expected)
    ]
    assert sorted((d.service, d.kind, d.key) for d in letters) == [
        ("shoe-reader", "signature", "T09"),
        ("shoe-reader", "signature", "T09"),
        ("table-controller", "signature", "T09"),
    ], deployment.log_text()
    alerts = read_alerts(deployment, 3)
    assert sorted((a.data.rule, a.subject, a.data.article) for a in alerts) == [
        ("DEVICE_SIGNATURE", "T09", "Art. 13"),
        ("DEVICE_SIGNATURE", "T09", "Art. 7"),
        ("DEVICE_SIGNATURE", "T09", "Art. 7"),
    ], deployment.log_text()
    assert read_raw(deployment, topics.SHOE, 1, timeout=3) == []
    assert read_raw(deployment, topics.TABLE, 1, timeout=3) == []


def write_each_topic(client: dict[str, Any], topic_prefix: str, key: bytes, value: bytes) -> list[str]:
    """Try ``value`` on every topic of the contract; the topics the broker took it on."""
    written = []
    for name in topics.ALL_TOPICS:
        producer = KafkaProducer(**client, acks="all", retries=0, enable_idempotence=False, max_block_ms=8000, request_timeout_ms=8000)
        try:
            producer.send(topic_prefix + name, key=key, value=value).get(timeout=15)
            written.append(name)
        except KafkaError:
            pass
        finally:
            producer.close(timeout=5)
    return written


def test_settlements_credentials_cannot_cause_a_device_signature_alert(deployment: Deployment) -> None:
    """Settlement, or whoever holds its credentials, writes a dead letter that says the
    table-controller refused a console input of T05 for its signature, on every topic it may
    write: no alert. A console input really refused (T06) still is one, so the detectors ran."""
    assert deployment.access is not None and deployment.access.kafka, "needs a broker with ACLs"
    for service in ("table-controller", "anomaly-detection"):
        deployment.start(service)
    forged = deadletter.dead_letter(
        "table-controller", b"{}", "the signature is not console/T05's", origin=topics.INPUTS, key="T05", kind=deadletter.SIGNATURE
    )
    client = deployment.access.kafka_client(SETTLEMENT_SERVICE)
    written = write_each_topic(client, deployment.topic_prefix, b"T05", deadletter.encode(forged))
    assert topics.SETTLEMENT in written, written  # settlement's credentials work

    deployment.key_store.issue("console/T06")
    settings = dataclasses.replace(
        Settings.from_env(FLOOR_SIMULATOR), kafka_bootstrap=deployment.bootstrap, topic_prefix=deployment.topic_prefix
    )
    publisher = Publisher(deployment.access.settings(settings, FLOOR_SIMULATOR), DeviceKeys({"console/T06": FORGED}))
    bet = m.BetPlaceInput(table_id="T06", bet_id="B1", patron_id="P1", seat="1", spot="banker", amount=100_000)  # type: ignore[arg-type]
    publisher.publish(codec.make(m.BetPlace, bet, id="spoof-6", source="console/T06", time=NOW))
    publisher.flush()
    publisher.close()

    raised = sorted((a.data.rule, a.subject) for a in read_alerts(deployment, 2, timeout=60))
    assert raised == [("DEVICE_SIGNATURE", "T06")], f"settlement wrote {written}\n{deployment.log_text()}"


def test_a_console_key_signs_for_its_own_table_only(deployment: Deployment) -> None:
    """T01's console signs a bet on T02 (sent keyed by T01, whose key signs it): refused,
    dead-lettered and alerted; the bet reaches no table."""
    for service in ("table-controller", "anomaly-detection"):
        deployment.start(service)
    publisher = deployment.publisher(FLOOR_SIMULATOR, deployment.device_keys())
    opened = m.RoundOpenInput(
        table_id="T02", shoe_id="S1", dealer_id="D1", profile="dicj", demo=False, min_bet=100, max_bet=1_000_000, currency="MOP"
    )
    publisher.publish(codec.make(m.RoundOpen, opened, id="T02:in:1", source="console/T02", time=NOW))
    bet = m.BetPlaceInput(table_id="T02", bet_id="B1", patron_id="P1", seat="1", spot="banker", amount=100_000)  # type: ignore[arg-type]
    publisher.publish_raw(topics.INPUTS, b"T01", codec.encode(codec.make(m.BetPlace, bet, id="T02:in:2", source="console/T01", time=NOW)))
    publisher.flush()
    publisher.close()

    letters = [deadletter.decode(v) for v in read_raw(deployment, topics.deadletter_topic("table-controller"), 1)]
    assert [(d.kind, d.key) for d in letters] == [("signature", "T01")], deployment.log_text()
    assert "T02" in letters[0].reason
    assert [(a.data.rule, a.subject) for a in read_alerts(deployment, 1)] == [("DEVICE_SIGNATURE", "T01")]
    table = [codec.decode(v) for v in read_raw(deployment, topics.TABLE, 2, timeout=10)]
    assert [e.event_type for e in table] == ["baccarat.round.opened"]


def test_a_replayed_signed_bet_is_refused_and_alerted_across_a_restart(deployment: Deployment) -> None:
    """A bet signed by T03's console, taken in round 1, is captured off the topic and sent again,
    byte for byte, into round 2, after more inputs than the table-controller remembers ids of and
    a kill -9 of it: refused, dead-lettered and alerted; round 2 gets no such bet."""
    for service in ("table-controller", "anomaly-detection"):
        deployment.start(service)
    publisher = deployment.publisher(FLOOR_SIMULATOR, deployment.device_keys())
    number = iter(range(1, 1000))

    def send(cls: type[m.Event], data: m.Data) -> None:
        publisher.publish(codec.make(cls, data, id=f"T03:in:{next(number)}", source="console/T03", time=NOW))

    def bet(bet_id: str) -> m.BetPlaceInput:
        return m.BetPlaceInput(table_id="T03", bet_id=bet_id, patron_id="P1", seat="1", spot="banker", amount=1_000)  # type: ignore[arg-type]

    opened = m.RoundOpenInput(
        table_id="T03", shoe_id="S1", dealer_id="D1", profile="dicj", demo=False, min_bet=100, max_bet=1_000_000, currency="MOP"
    )
    send(m.RoundOpen, opened)
    send(m.BetPlace, bet("B1"))
    send(m.RoundVoid, m.RoundVoidInput(table_id="T03", reason="table closed"))
    send(m.RoundOpen, opened)
    for k in range(2, 70):
        send(m.BetPlace, bet(f"B{k}"))
    publisher.flush()
    publisher.close()
    deployment.wait_until_consumed("table-controller")
    deployment.restart("table-controller")

    captured = next(r for r in deployment.records(topics.INPUTS) if b'"bet_id":"B1"' in r.value)
    assert dict(captured.headers), "the bet went out signed"
    replayer = KafkaProducer(**deployment.access.kafka_client(FLOOR_SIMULATOR), acks="all")  # type: ignore[union-attr]
    replayer.send(deployment.topic(topics.INPUTS), key=captured.key, value=captured.value, headers=captured.headers).get(timeout=30)
    replayer.close()

    letters = [deadletter.decode(v) for v in read_raw(deployment, topics.deadletter_topic("table-controller"), 1)]
    assert [(d.kind, d.key) for d in letters] == [("signature", "T03")], deployment.log_text()
    assert [(a.data.rule, a.subject) for a in read_alerts(deployment, 1)] == [("DEVICE_SIGNATURE", "T03")]
    placed = [e for e in deployment.read(topics.TABLE, 69, timeout=20) if isinstance(e, m.BetPlaced)]
    assert sorted(e.data.bet_id for e in placed) == sorted(f"B{k}" for k in range(1, 70))  # B1 once, in round 1


def test_a_replayed_shoe_line_is_refused_and_alerted_across_a_restart(deployment: Deployment) -> None:
    """Lines of T04's shoe, acknowledged (and the acknowledgements settled, kept in Redis), then one
    of them sent again after a kill -9 of the shoe-reader: refused, dead-lettered and alerted; the
    shoe topic has each line once."""
    for service in ("shoe-reader", "anomaly-detection"):
        deployment.start(service)
    keys = deployment.device_keys()
    lines = [signed_line(format_line("T04", 1, NOW, Kind.START, "S1", 8, "manual"), keys)]
    lines += [signed_line(format_line("T04", seq, NOW, Kind.CARD, "S1", seq - 1, "9H", "down"), keys) for seq in range(2, 6)]

    async def send_all() -> None:
        gateway = ShoeGateway("127.0.0.1", deployment.reader_port)
        try:
            for seq, line in enumerate(lines, start=1):
                await gateway.send("T04", seq, line)
            await gateway.wait_acknowledged(timeout=60)
        finally:
            await gateway.close()

    asyncio.run(send_all())
    settled = redis.Redis.from_url(deployment.redis_url)
    deadline = time.monotonic() + 60  # SETTLE_SECONDS after the last acknowledgement
    while settled.hget(f"{deployment.redis_prefix}shoe-reader:acknowledged", "T04") != b"5":
        assert time.monotonic() < deadline, deployment.log_text()
        time.sleep(0.5)
    settled.close()
    deployment.restart("shoe-reader")
    with socket.create_connection(("127.0.0.1", deployment.reader_port)) as shoe:
        shoe.sendall(lines[2])
        shoe.settimeout(30)
        assert shoe.recv(100) == b"ACK T04 3\n"

    letters = [deadletter.decode(v) for v in read_raw(deployment, topics.deadletter_topic("shoe-reader"), 1)]
    assert [(d.kind, d.key, d.payload) for d in letters] == [("signature", "T04", lines[2])], deployment.log_text()
    assert [(a.data.rule, a.subject) for a in read_alerts(deployment, 1)] == [("DEVICE_SIGNATURE", "T04")]
    assert len(read_raw(deployment, topics.SHOE, 6, timeout=10)) == 5


@pytest.mark.parametrize("service", ["shoe-reader", "table-controller"])
def test_a_verifier_refuses_to_start_without_device_keys_unless_told_they_are_off(deployment: Deployment, service: str) -> None:
    env = {name: value for name, value in deployment.service_env(service).items() if not name.startswith("DEVICE_")}
    refused = subprocess.run([str(SURVEIL), "serve", service], env=env, capture_output=True, timeout=120)
    assert refused.returncode != 0
    assert b"DEVICE_KEYS" in refused.stdout + refused.stderr

    deployment.env = {"DEVICE_SIGNATURES": "off"}
    deployment.start(service)
    deadline = time.monotonic() + 60
    while True:
        try:
            samples = {name: value for name, _, value in deployment.metric_samples(service)}
            break
        except OSError:
            assert time.monotonic() < deadline and deployment.alive(service), deployment.log_text()
            time.sleep(0.5)
    assert samples["surveil_device_signatures_enforced"] == 0
    assert "device signatures are off" in deployment.log_tail(service, 200)
