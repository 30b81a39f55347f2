"""Hostile records into the services as they run, on the real broker: the live part of the record
fuzzing (``record_fuzzing.py`` is the same through each service's own per-record path, offline).

Random records (a seeded ``random.Random``) go to every topic a service reads: header keys of any
bytes (UTF-8 or not) and values (a signature right, wrong, not ASCII, empty), keys of any bytes
(none, a table's, up to hundreds of KB), values none, random bytes, valid events cut short, valid
events signed by another key, up to the broker's maximum record size. None of them is a record
any service can use, so each must end as one dead letter per service that reads its topic, naming
it (topic, partition, offset); every service must stay up and commit past all of them; and the
shoe-reader, which reads the tail of ``baccarat.shoe`` when it starts, must start.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import redis
from kafka import KafkaProducer

from faults.fuzzing import FloorKeys, material
from integration.deployment import Deployment
from surveil.anomaly_detection.app import FACTS, UNCHAINED_ALERTS
from surveil.events import deadletter, topics
from surveil.events.signing import DeviceKeys
from surveil.events.topics import ALL_TOPICS
from surveil.runtime.access import PrefixAccess
from surveil.runtime.config import kafka_client_config
from surveil.runtime.topic_admin import create_topics, delete_topics

# Who reads each topic (and so dead-letters each record of it it cannot use).
READERS = {
    topics.SHOE: ("table-controller", "anomaly-detection"),
    topics.INPUTS: ("table-controller",),
    topics.TABLE: ("settlement", "anomaly-detection"),
    topics.SETTLEMENT: ("anomaly-detection",),
    FACTS: ("anomaly-detection",),
    UNCHAINED_ALERTS: ("anomaly-detection",),
    # The detectors read the verifiers' dead letters for spoofed devices, and pass over what they cannot read.
    topics.deadletter_topic("table-controller"): (),
}
SERVICES = ("table-controller", "settlement", "anomaly-detection")
OTHER_KEYS = DeviceKeys(FloorKeys("not the floor's"))  # keys no device was issued
FRAMING = 2048  # bytes left for a record's framing and headers' overhead under the broker's maximum


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


Record = tuple[str, bytes | None, bytes | None, list[tuple[str, bytes]]]


def _size(rng: random.Random, most: int) -> int:
    roll = rng.random()
    return rng.randint(0, 300) if roll < 0.7 else rng.randint(0, 65_536) if roll < 0.9 else rng.randint(0, most)


def _bytes(rng: random.Random, size: int) -> bytes:
    head = rng.randbytes(min(size, 64))
    return (head + rng.choice([b"\x00", b"\xff", b"{", b"x", "é".encode()]) * size)[:size]


def hostile_record(rng: random.Random) -> Record:
    """One record no service can use, to a topic some service reads."""
    mat = material()
    topic = rng.choice(sorted(READERS))
    key = rng.choice([None, rng.choice(mat.ids["table_id"]).encode(), rng.randbytes(rng.randint(0, 40)), _bytes(rng, _size(rng, 300_000))])
    headers: list[tuple[str, bytes]] = []
    for _ in range(rng.choice([0, 0, 1, 2, 3])):
        name: str = rng.choice(["signature", "signature", RawKey(rng.randbytes(rng.randint(1, 8))), "x" * rng.randint(0, 20)])
        headers.append((name, rng.choice([b"", rng.randbytes(64), b"\xff\xfe", OTHER_KEYS.header("console/T", b"")])))
    room = topics.MAX_RECORD_BYTES - FRAMING - len(key or b"") - sum(len(k.encode()) + len(v) for k, v in headers)
    valid = rng.choice(mat.by_topic.get(topic) or mat.by_topic[topics.TABLE])
    value = rng.choice(
        [
            None,
            _bytes(rng, min(_size(rng, room), room)),
            valid[: rng.randint(0, len(valid) - 1)],  # cut short: never JSON
            b"\x90" if topic == FACTS else b"[]",
        ]
    )
    if topic == topics.INPUTS and rng.random() < 0.3:  # a whole input, signed with a key not the floor's
        value = rng.choice(mat.by_topic[topics.INPUTS])
        headers = [("signature", OTHER_KEYS.header(f"console/{(key or b'').decode(errors='replace')}", value))]
    return topic, key, value, headers


@dataclass
class LiveVerdict:
    seed: int
    records: int = 0
    bytes: int = 0
    letters: int = 0
    by_topic: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0


def fuzz_live(deployment: Deployment, count: int, seed: int, progress: Callable[[str], None] = lambda line: None) -> LiveVerdict:
    """``count`` hostile records (from ``seed``) to the deployment's topics while the services run;
    raises AssertionError, with what went wrong, unless every one is dead-lettered by every
    service that reads its topic, and every service stays up and commits past them all."""
    rng = random.Random(seed)
    verdict = LiveVerdict(seed)
    started = time.monotonic()
    deployment.start_all(SERVICES)
    expected: set[tuple[str, str, int, int]] = set()
    producer = KafkaProducer(**kafka_client_config(deployment.bootstrap), acks="all", max_request_size=topics.MAX_RECORD_BYTES, linger_ms=5)
    try:
        sent = []
        for n in range(count):
            topic, key, value, headers = hostile_record(rng)
            if key is None and value is None:
                value = b""
            sent.append((topic, producer.send(deployment.topic(topic), key=key, value=value, headers=headers)))
            verdict.records += 1
            verdict.bytes += len(key or b"") + len(value or b"")
            verdict.by_topic[topic] += 1
            if (n + 1) % 100 == 0:
                producer.flush(timeout=120)
                progress(f"{n + 1:,} records sent ({verdict.bytes / 1e6:,.1f} MB)")
        producer.flush(timeout=120)
        for topic, future in sent:
            metadata = future.get(timeout=60)
            expected.update((service, metadata.topic, metadata.partition, metadata.offset) for service in READERS[topic])
    finally:
        producer.close()
    found: set[tuple[str, str, int, int]] = set()
    deadline = time.monotonic() + 300 + count
    while not expected <= found:
        for service in SERVICES:
            assert deployment.alive(service), f"{service} stopped:\n{deployment.log_tail(service, 80)}"
        assert time.monotonic() < deadline, (
            f"seed {seed}: {len(expected - found)} of {len(expected)} dead letters missing, e.g. {sorted(expected - found)[:5]}\n"
            + deployment.log_text()
        )
        found = set()
        values = [value for service in SERVICES for value in deployment.read_values(topics.deadletter_topic(service), timeout=10)]
        for value in values:
            try:
                letter = deadletter.decode(value or b"")
            except msgspec.DecodeError:
                continue  # one of the hostile records sent to the dead-letter topic
            if letter.topic is not None and letter.offset is not None and letter.partition is not None:
                found.add((letter.service, letter.topic, letter.partition, letter.offset))
        progress(f"{len(found & expected):,} of {len(expected):,} dead letters")
    assert found - expected == set(), f"seed {seed}: dead letters of records no service should refuse: {sorted(found - expected)[:5]}"
    verdict.letters = len(found)
    for service in SERVICES:
        deployment.wait_until_consumed(service, timeout_s=300)
        assert deployment.alive(service), f"{service} stopped:\n{deployment.log_tail(service, 80)}"
    deployment.start("shoe-reader")  # it reads the tail of baccarat.shoe, and listens only after
    verdict.seconds = time.monotonic() - started
    return verdict


@contextmanager
def own_deployment(bootstrap: str, redis_url: str, logs: Path) -> Iterator[Deployment]:
    """A deployment of its own on the stack (its topics, Redis keys and principals' rights, under
    a prefix of its own), removed afterwards: what the tests' ``deployment`` fixture gives."""
    tag = f"fuzz-{uuid.uuid4().hex[:8]}"
    names = [f"{tag}.{name}" for name in ALL_TOPICS]
    create_topics(bootstrap, names)
    access = PrefixAccess(bootstrap, redis_url, f"{tag}.", f"{tag}:")
    deployment = Deployment(bootstrap, redis_url, f"{tag}.", f"{tag}:", logs, access)
    try:
        yield deployment
    finally:
        deployment.stop_all()
        access.close()
        delete_topics(bootstrap, [*names, *(f"{tag}.{name}" for name in (FACTS, UNCHAINED_ALERTS))])
        client = redis.Redis.from_url(redis_url)
        doomed = list(client.scan_iter(match=f"{tag}:*", count=1000))
        for i in range(0, len(doomed), 500):
            client.unlink(*doomed[i : i + 500])
        client.close()
