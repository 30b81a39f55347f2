"""Hostile records on the real broker, into the services as they run: a record no service can
use becomes a dead letter, the service stays up and commits past it, whatever its headers, key,
value and size (up to the broker's maximum)."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer

from faults import live_fuzzing
from faults.live_fuzzing import RawKey
from integration.deployment import Deployment
from support import seeds
from surveil.anomaly_detection.app import FACTS, UNCHAINED_ALERTS
from surveil.events import codec, deadletter, topics
from surveil.events import models as m
from surveil.runtime.config import Settings, kafka_client_config
from surveil.runtime.kafka import partition_for
from surveil.shoe_reader.service import published_sequences

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from floor_producer import librdkafka_config  # noqa: E402  (kafka-python's settings in librdkafka's names)

pytestmark = pytest.mark.faults

LIVE_RECORDS = int(os.environ.get("FUZZ_LIVE_RECORDS", "200"))


def send(deployment: Deployment, topic: str, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]) -> None:
    """One record to ``topic``, as the admin: any key, value and headers a client may send."""
    producer = KafkaProducer(**kafka_client_config(deployment.bootstrap), acks="all")
    try:
        producer.send(deployment.topic(topic), key=key, value=value, headers=headers).get(timeout=60)
    finally:
        producer.close()


def readable(value: bytes) -> deadletter.DeadLetter | None:
    try:
        return deadletter.decode(value)
    except msgspec.DecodeError:  # one a test wrote unreadable on purpose
        return None


def wait_for_letters(deployment: Deployment, service: str, expected: int, timeout: float = 90) -> list[deadletter.DeadLetter]:
    deadline = time.monotonic() + timeout
    letters: list[deadletter.DeadLetter] = []
    while time.monotonic() < deadline:
        assert deployment.alive(service), f"{service} died:\n{deployment.log_tail(service, 60)}"
        values = deployment.read_values(topics.deadletter_topic(service), expected, timeout=5)
        letters = [letter for v in values if (letter := readable(v))]
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
    for service, expected in zip(services, (1, 1, 2)):
        letters += wait_for_letters(deployment, service, expected)
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


def test_a_batch_compressed_in_any_codec_is_read_and_refused_by_every_consumer(deployment: Deployment) -> None:
    """A producer picks its batches' codec: kafka-python reads gzip alone (without more
    libraries a poll that met snappy, lz4 or zstd failed at every try, and the runner never got
    past it), and the faust worker's wrapped batches were read compressed. The broker stores the
    contract's topics uncompressed (``topic_admin.STORED_UNCOMPRESSED``)."""
    services = ("table-controller", "settlement", "anomaly-detection")
    deployment.start_all(services)
    codecs = ("gzip", "snappy", "lz4", "zstd")

    def hostile(codec: str) -> bytes:  # compressible: librdkafka sends a batch compression does not shrink as it is
        return f"not an event, {codec}: {'x' * 2000}".encode()

    partitions = {topic: partition_for(b"T01", len(deployment.partitions(topic))) for topic in (topics.SHOE, topics.TABLE)}
    for name in codecs:  # librdkafka compresses in every codec Kafka has
        producer = Producer({**librdkafka_config(kafka_client_config(deployment.bootstrap)), "compression.codec": name, "linger.ms": 50})
        for topic, partition in partitions.items():
            for _ in range(3):  # a batch of a few records
                producer.produce(deployment.topic(topic), hostile(name), b"T01", partition=partition)
        assert producer.flush(30) == 0
    letters = []
    for service, expected in zip(services, (3 * len(codecs), 3 * len(codecs), 6 * len(codecs))):
        letters += wait_for_letters(deployment, service, expected)
    assert sorted(letter.payload for letter in letters if letter.service == "anomaly-detection") == sorted(
        hostile(name) for name in codecs for _ in range(6)
    )
    for service in services:
        deployment.wait_until_consumed(service, timeout_s=120)
        assert deployment.alive(service), deployment.log_tail(service, 60)


def test_records_the_detectors_cannot_use_on_any_of_their_topics_are_dead_letters(deployment: Deployment) -> None:
    """On every topic the faust worker reads, its internal ones too: a record it cannot use is a
    dead letter (a letter it cannot read, on the dead-letter topic, is passed over), and the
    worker goes on: a spoofed-signature letter after them all is still an alert."""
    deployment.start("anomaly-detection")
    deadline = time.monotonic() + 120
    while not (deployment.partitions(FACTS) and deployment.partitions(UNCHAINED_ALERTS)):  # declared by the worker
        assert time.monotonic() < deadline and deployment.alive("anomaly-detection"), deployment.log_tail("anomaly-detection", 60)
        time.sleep(0.5)
    now = datetime.now(UTC)
    closed = codec.make(m.BetsClosed, m.BetsClosedData(table_id="T01", round_id="R1"), id="c1", source="test", time=now)
    send(deployment, FACTS, b"P1", b"\x93garbage", [])
    send(deployment, UNCHAINED_ALERTS, b"T01", codec.encode(closed), [])  # an event, but no alert
    send(deployment, UNCHAINED_ALERTS, b"T01", b"{", [])
    send(deployment, topics.TABLE, b"T01", None, [])  # a tombstone
    unreadable = deadletter.encode(deadletter.dead_letter("table-controller", b"x", "spoofed", origin="o", key="T01", kind="signature"))
    refusals = topics.deadletter_topic("table-controller")  # the detectors read it for spoofed devices
    send(deployment, refusals, b"T01", unreadable.replace(b'"payload_b64":"eA=="', b'"payload_b64":"!!"'), [])
    spoofed = deadletter.dead_letter("table-controller", b"x", "spoofed", origin="o", topic="t", offset=7, key="T02", kind="signature")
    send(deployment, refusals, b"T02", deadletter.encode(spoofed), [])
    letters = wait_for_letters(deployment, "anomaly-detection", 4)
    assert sorted(x.topic or "" for x in letters) == sorted(
        deployment.topic(t) for t in (FACTS, UNCHAINED_ALERTS, UNCHAINED_ALERTS, topics.TABLE)
    )
    alerts = [codec.decode(v) for v in deployment.read_values(topics.ALERTS, 1, timeout=60)]
    assert [(a.data.rule, a.subject) for a in alerts if isinstance(a, m.AlertRaised)] == [("DEVICE_SIGNATURE", "T02")]
    assert deployment.alive("anomaly-detection"), deployment.log_tail("anomaly-detection", 60)


def test_the_shoe_reader_learns_its_last_sequences_whatever_else_the_shoe_topic_holds(deployment: Deployment) -> None:
    """At its start the shoe-reader reads the tail of ``baccarat.shoe`` for the last sequence it
    published per table: a record there that is not its own (no key, not JSON, an id without a
    sequence, JSON nested too deeply to decode) stopped it from starting at all."""
    now = datetime.now(UTC)
    started = codec.make(
        m.ShoeStarted, m.ShoeStartedData(table_id="T01", shoe_id="S1", decks=8, automatic=False), id="T01:S1:7", source="t", time=now
    )
    nested = b'{"a":' * 100_000 + b"1" + b"}" * 100_000  # deeper than msgspec recurses
    junk = [
        (None, b"x"),
        (b"T01", b"\xff"),
        (b"T01", None),
        (b"T01", b'{"id": "T01:S1:x"}'),
        (b"\xff", b'{"id": "T02:S1:3"}'),
        (b"T01", nested),
    ]
    for key, value in junk:
        send(deployment, topics.SHOE, key, value, [])
    send(deployment, topics.SHOE, b"T01", codec.encode(started), [])
    settings = dataclasses.replace(
        Settings.from_env("shoe-reader"), kafka_bootstrap=deployment.bootstrap, topic_prefix=deployment.topic_prefix
    )
    assert published_sequences(settings) == {"T01": 7}
    deployment.start("shoe-reader")  # it listens (Deployment.start waits for its port)


def test_random_hostile_records_into_the_running_services_are_each_dead_lettered_and_none_stops(
    deployment: Deployment, pytestconfig: pytest.Config
) -> None:
    """``faults/live_fuzzing.py``: a few hundred random records (any headers, keys, values, up to
    the broker's maximum size) to every topic a service reads; each one dead-lettered by every
    service that reads its topic; every service up and committed past them; the shoe-reader
    starts over them. ``bench/fuzz.py --live`` sends thousands."""
    seed = seeds.seed("FUZZ_SEED")
    seeds.announce(pytestconfig, "live fuzzing", "FUZZ_SEED", seed)
    verdict = live_fuzzing.fuzz_live(deployment, LIVE_RECORDS, seed)
    assert verdict.records == LIVE_RECORDS and verdict.letters >= LIVE_RECORDS * 0.7


def test_faust_request_reply_headers_on_the_detectors_topics_make_them_send_nothing(deployment: Deployment) -> None:
    """faust answers a record whose headers name a reply topic, with what its agent yields for it:
    a producer of the shoe topic could make the detectors write to any topic they may write to
    (the alerts'), or stop their agent with a reply topic that is not UTF-8. Their agents yield
    nothing, so no header is read as a request."""
    deployment.start("anomaly-detection")
    requests = [
        [("Faust-Ag-ReplyTo", deployment.topic(topics.ALERTS).encode()), ("Faust-Ag-CorrelationId", b"c1")],
        [("Faust-Ag-ReplyTo", b"\xff\xfe")],
    ]
    for headers in requests:
        send(deployment, topics.SHOE, b"T01", b"not an event", headers)
    spoofed = deadletter.dead_letter("table-controller", b"x", "spoofed", origin="o", topic="t", offset=7, key="T02", kind="signature")
    send(deployment, topics.deadletter_topic("table-controller"), b"T02", deadletter.encode(spoofed), [])  # after them: still an alert
    letters = wait_for_letters(deployment, "anomaly-detection", len(requests))
    assert [x.topic for x in letters] == [deployment.topic(topics.SHOE)] * len(requests)
    values = deployment.read_values(topics.ALERTS, 1, timeout=60)
    assert [(a.data.rule, a.subject) for a in map(codec.decode, values) if isinstance(a, m.AlertRaised)] == [("DEVICE_SIGNATURE", "T02")]
    deployment.wait_until_consumed("anomaly-detection", timeout_s=60)
    assert deployment.alive("anomaly-detection"), deployment.log_tail("anomaly-detection", 60)
    assert "Crashed reason" not in deployment.log_tail("anomaly-detection", 400)  # faust's line for a crashed agent
