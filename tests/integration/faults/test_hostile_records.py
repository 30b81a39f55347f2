"""Hostile records on the real broker, into the services as they run: a record no service can
use becomes a dead letter, the service stays up and commits past it, whatever its headers, key,
value and size (up to the broker's maximum)."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaProducer

from integration.deployment import Deployment
from surveil.events import deadletter, topics
from surveil.runtime.config import kafka_client_config

pytestmark = pytest.mark.faults


class RawKey(str):
    """A header key sent as ``raw``, whatever its bytes (kafka-python sends a key's ``encode()``;
    librdkafka takes any bytes, and the broker stores them)."""

    raw: bytes

    def __new__(cls, raw: bytes) -> RawKey:
        key = super().__new__(cls, raw.decode("latin-1"))
        key.raw = raw
        return key

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return self.raw


def send(deployment: Deployment, topic: str, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]) -> None:
    """One record to ``topic``, as the admin: any key, value and headers a client may send."""
    producer = KafkaProducer(**kafka_client_config(deployment.bootstrap), acks="all")
    try:
        producer.send(deployment.topic(topic), key=key, value=value, headers=headers).get(timeout=60)
    finally:
        producer.close()


def wait_for_letters(deployment: Deployment, service: str, expected: int, timeout: float = 90) -> list[deadletter.DeadLetter]:
    deadline = time.monotonic() + timeout
    letters: list[deadletter.DeadLetter] = []
    while time.monotonic() < deadline:
        assert deployment.alive(service), f"{service} died:\n{deployment.log_tail(service, 60)}"
        letters = [deadletter.decode(v) for v in deployment.read_values(topics.DEADLETTER, expected, timeout=5)]
        if len(letters) >= expected:
            return letters
    raise AssertionError(f"{len(letters)} dead letters, not {expected}, after {timeout} s:\n{deployment.log_tail(service, 60)}")


def test_a_signature_header_that_is_not_ascii_is_a_dead_letter_and_the_controller_goes_on(deployment: Deployment) -> None:
    """The header's bytes ff fe: the controller used to hand them, decoded with replacement
    characters, to ``hmac.compare_digest``, which raised TypeError outside the per-event error
    handling; the process exited, and every restart died on the same record."""
    deployment.start("table-controller")
    send(deployment, topics.INPUTS, b"T01", b'{"type": "baccarat.input.bets.close"}', [("signature", b"\xff\xfe")])
    [letter] = wait_for_letters(deployment, "table-controller", 1)
    assert (letter.service, letter.kind, letter.key, letter.topic) == (
        "table-controller",
        "signature",
        "T01",
        deployment.topic(topics.INPUTS),
    )
    deployment.wait_until_consumed("table-controller", timeout_s=60)
    assert deployment.alive("table-controller")


def test_a_record_at_the_brokers_maximum_is_a_dead_letter_that_fits_and_the_runner_goes_on(deployment: Deployment) -> None:
    """A dead letter is its input in base64 (4/3 of its size) and a reason: one of an input near
    the broker's maximum message size was too large to send, and the runner, whose outbox was
    already in Redis, tried to publish it for ever."""
    deployment.start("settlement")
    value = b"\x00garbage" * 125_000  # a million bytes: the broker takes it, its base64 it would not
    send(deployment, topics.TABLE, b"T01", value, [])
    [letter] = wait_for_letters(deployment, "settlement", 1)
    assert (letter.service, letter.kind, letter.key) == ("settlement", "invalid", "T01")
    assert letter.payload_bytes == len(value) and value.startswith(letter.payload)
    deployment.wait_until_consumed("settlement", timeout_s=60)
    assert deployment.alive("settlement")


def test_a_header_key_that_is_not_utf8_is_read_and_refused_by_every_consumer(deployment: Deployment) -> None:
    """Both Kafka clients decoded header keys as strict UTF-8: kafka-python's consumer raised at
    every poll (the runner never got past the record), aiokafka's stopped the faust worker."""
    services = ("table-controller", "settlement", "anomaly-detection")
    deployment.start_all(services)  # each reads its topics from the start
    headers = [(RawKey(b"\xff\xfe"), b"1"), ("signature", b"\xff")]
    send(deployment, topics.SHOE, b"T01", b"not an event", headers)  # table-controller, anomaly-detection
    send(deployment, topics.TABLE, b"T01", b"not an event", headers)  # settlement, anomaly-detection
    letters = []
    for service in services:
        letters += [letter for letter in wait_for_letters(deployment, service, 4) if letter.service == service]
    assert sorted((letter.service, letter.topic) for letter in letters) == sorted(
        [
            ("anomaly-detection", deployment.topic(topics.SHOE)),
            ("anomaly-detection", deployment.topic(topics.TABLE)),
            ("settlement", deployment.topic(topics.TABLE)),
            ("table-controller", deployment.topic(topics.SHOE)),
        ]
    )
    for service in services:
        deployment.wait_until_consumed(service, timeout_s=120)
        assert deployment.alive(service), deployment.log_tail(service, 60)
