"""Spoofed device messages on the real broker: a shoe line and a console input that do not carry
their device's signature are refused (nothing reaches the shoe or table topics), dead-lettered
with kind "signature", and raised as DEVICE_SIGNATURE alerts for the table they claim."""

from __future__ import annotations

import dataclasses
import socket
import time
from datetime import UTC, datetime
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError

from integration.deployment import Deployment
from surveil.events import codec, deadletter, topics
from surveil.events import models as m
from surveil.events.shoe_protocol import Kind, format_line, signed_line
from surveil.events.signing import DeviceKeys
from surveil.runtime.access import FLOOR_SIMULATOR, SETTLEMENT_SERVICE
from surveil.runtime.config import Settings, kafka_client_config
from surveil.runtime.kafka import Publisher

NOW = datetime.now(UTC)


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


def test_spoofed_shoe_lines_and_inputs_are_refused_and_alerted(deployment: Deployment) -> None:
    for service in ("shoe-reader", "table-controller", "anomaly-detection"):
        deployment.start(service)
    forger = DeviceKeys("not the floor's secret")
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
    alerts = [codec.decode(v) for v in read_raw(deployment, topics.ALERTS, 3)]
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

    settings = dataclasses.replace(
        Settings.from_env(FLOOR_SIMULATOR), kafka_bootstrap=deployment.bootstrap, topic_prefix=deployment.topic_prefix
    )
    publisher = Publisher(deployment.access.settings(settings, FLOOR_SIMULATOR), DeviceKeys("not the floor's secret"))
    bet = m.BetPlaceInput(table_id="T06", bet_id="B1", patron_id="P1", seat="1", spot="banker", amount=100_000)  # type: ignore[arg-type]
    publisher.publish(codec.make(m.BetPlace, bet, id="spoof-6", source="console/T06", time=NOW))
    publisher.flush()
    publisher.close()

    alerts = [codec.decode(v) for v in read_raw(deployment, topics.ALERTS, 2, timeout=60)]
    raised = sorted((a.data.rule, a.subject) for a in alerts if isinstance(a, m.AlertRaised))
    assert raised == [("DEVICE_SIGNATURE", "T06")], f"settlement wrote {written}\n{deployment.log_text()}"
