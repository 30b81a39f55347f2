"""A settlement deployment of its own on the shared broker and Redis: the test's topics (its
TOPIC_PREFIX), its Redis keys (its REDIS_PREFIX), and ``surveil serve settlement`` as a
subprocess that a test can start, kill -9 and start again. Also the floors the tests play
(surveil.sim) and their offline settlement, the reference for the live one."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from surveil.events import codec
from surveil.events import models as m
from surveil.runtime import topics
from surveil.runtime.access import SETTLEMENT_SERVICE, PrefixAccess
from surveil.runtime.config import Settings, kafka_client_config
from surveil.runtime.state import MemoryBackend, RedisBackend
from surveil.settlement.ledger import NAMESPACE, Ledger
from surveil.settlement.reconcile import Recomputation, recompute
from surveil.sim.floor import Floor
from surveil.sim.record import record

ROOT = Path(__file__).resolve().parents[3]
SURVEIL = ROOT / ".venv" / "bin" / "surveil"
INSTANCE_ID = "it-settlement"  # the same on every start: a restart fences the killed process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Deployment:
    bootstrap: str
    redis_url: str
    topic_prefix: str
    redis_prefix: str
    logs: Path
    # The service's own credentials and rights in place of the operator's (tests/integration/conftest.py).
    access: PrefixAccess | None = None
    metrics_port: int = field(default_factory=free_port)
    service: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def topic(self, name: str) -> str:
        return self.topic_prefix + name

    # ---- input ---------------------------------------------------------------------------------

    def publish(self, events: Iterable[m.Event]) -> None:
        self.publish_raw((event.subject.encode(), codec.encode(event)) for event in events)

    def publish_raw(self, records: Iterable[tuple[bytes, bytes]], topic: str = topics.TABLE) -> None:
        producer = KafkaProducer(**kafka_client_config(self.bootstrap), acks="all", enable_idempotence=True, linger_ms=20)
        try:
            for key, value in records:
                producer.send(self.topic(topic), key=key, value=value)
            producer.flush(timeout=60)
        finally:
            producer.close()

    # ---- the service ---------------------------------------------------------------------------

    def start(self) -> subprocess.Popen[bytes]:
        assert self.service is None or self.service.poll() is not None, "already running"
        self.starts += 1
        env = {
            **os.environ,
            "KAFKA_BOOTSTRAP": self.bootstrap,
            "REDIS_URL": self.redis_url,
            "METRICS_PORT": str(self.metrics_port),
            "TOPIC_PREFIX": self.topic_prefix,
            "REDIS_PREFIX": self.redis_prefix,
            "INSTANCE_ID": INSTANCE_ID,
        }
        if self.access is not None:
            env = self.access.env(SETTLEMENT_SERVICE, env)
        log = (self.logs / f"settlement-{self.starts}.log").open("wb")
        self.service = subprocess.Popen([str(SURVEIL), "serve", "settlement"], env=env, stdout=log, stderr=subprocess.STDOUT)
        return self.service

    def as_service(self, settings: Settings) -> Settings:
        """``settings`` logged in as the settlement principal, for a runner in the test's process."""
        return settings if self.access is None else self.access.settings(settings, SETTLEMENT_SERVICE)  # type: ignore[no-any-return]

    def kill(self) -> None:
        """kill -9: no clean-up of any kind."""
        assert self.service is not None
        self.service.send_signal(signal.SIGKILL)
        self.service.wait(30)

    def stop(self) -> None:
        if self.service is not None and self.service.poll() is None:
            self.service.terminate()
            try:
                self.service.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_tail(self, lines: int = 30) -> str:
        path = self.logs / f"settlement-{self.starts}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    # ---- progress ------------------------------------------------------------------------------

    def _partitions(self, name: str) -> list[TopicPartition]:
        consumer = KafkaConsumer(**kafka_client_config(self.bootstrap))
        try:
            return [TopicPartition(self.topic(name), p) for p in sorted(consumer.partitions_for_topic(self.topic(name)) or ())]
        finally:
            consumer.close()

    def end_offsets(self, name: str, committed_only: bool = False) -> dict[TopicPartition, int]:
        isolation = "read_committed" if committed_only else "read_uncommitted"
        consumer = KafkaConsumer(**kafka_client_config(self.bootstrap), isolation_level=isolation)
        try:
            return dict(consumer.end_offsets(self._partitions(name)))
        finally:
            consumer.close()

    def committed_offsets(self) -> dict[TopicPartition, int]:
        """The service's consumer group's committed offsets on the table topic (read without
        joining the group)."""
        consumer = KafkaConsumer(**kafka_client_config(self.bootstrap), group_id=self.topic_prefix + "settlement", enable_auto_commit=False)
        try:
            committed = {tp: consumer.committed(tp) for tp in self._partitions(topics.TABLE)}
            return {tp: offset for tp, offset in committed.items() if offset is not None}
        finally:
            consumer.close()

    def applied_offsets(self) -> dict[str, int]:
        """What the service applied to Redis, per ``topic:partition`` (the runner's progress)."""
        return self.redis_backend().progress(NAMESPACE)

    def wait_until_settled(self, timeout_s: float = 180) -> None:
        """Until the service committed, in Kafka, every input offset: the ledger and the outputs
        of the whole input are in."""
        wanted = {tp: end for tp, end in self.end_offsets(topics.TABLE).items() if end}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            committed = self.committed_offsets()
            if all(committed.get(tp, 0) >= end for tp, end in wanted.items()):
                return
            assert self.service is None or self.service.poll() is None, f"settlement died:\n{self.log_tail()}"
            time.sleep(0.2)
        raise AssertionError(f"not settled after {timeout_s} s: committed {self.committed_offsets()}, wanted {wanted}\n{self.log_tail()}")

    # ---- output --------------------------------------------------------------------------------

    def read(self, name: str) -> list[Any]:
        """Every committed record on the topic (read_committed), from the start."""
        consumer = KafkaConsumer(**kafka_client_config(self.bootstrap), isolation_level="read_committed", enable_auto_commit=False)
        try:
            partitions = self._partitions(name)
            consumer.assign(partitions)
            consumer.seek_to_beginning(*partitions)
            end = consumer.end_offsets(partitions)
            records: list[Any] = []
            deadline = time.monotonic() + 60
            while any(consumer.position(tp) < end[tp] for tp in partitions):
                assert time.monotonic() < deadline, "could not read the topic to its end"
                for batch in consumer.poll(timeout_ms=500).values():
                    records.extend(batch)
            return records
        finally:
            consumer.close()

    def settlement_events(self) -> list[m.Event]:
        return [codec.decode(record.value) for record in self.read(topics.SETTLEMENT)]

    # ---- the ledger ----------------------------------------------------------------------------

    def redis_backend(self) -> RedisBackend:
        return RedisBackend(redis.Redis.from_url(self.redis_url), self.redis_prefix)

    def ledger(self) -> Ledger:
        return Ledger(self.redis_backend())

    def dump(self) -> dict[str, Any]:
        """Every settlement key in Redis but the runner's own (progress, outbox): values as
        bytes, hashes as dicts of ints."""
        client = redis.Redis.from_url(self.redis_url)
        try:
            found: dict[str, Any] = {}
            start = len(self.redis_prefix)
            for raw_key in client.scan_iter(match=f"{self.redis_prefix}{NAMESPACE}:*", count=1000):
                key = raw_key.decode()[start:]
                if key.startswith((f"{NAMESPACE}:progress", f"{NAMESPACE}:outbox:")):
                    continue
                if client.type(raw_key) == b"hash":
                    found[key] = {k.decode(): int(v) for k, v in client.hgetall(raw_key).items()}
                else:
                    found[key] = client.get(raw_key)
            return found
        finally:
            client.close()


def dump_memory(backend: MemoryBackend) -> dict[str, Any]:
    """The same view of a ledger recomputed in memory."""
    return {**backend.data, **{key: dict(values) for key, values in backend.hashes.items() if values}}


# ---- the floors -------------------------------------------------------------------------------

SETTLEMENT_INPUTS = (m.RoundOpened, m.BetPlaced, m.BetChanged, m.BetWithdrawn, m.RoundCompleted, m.RoundVoided)


def simulated_floor(tables: int, shoes: int, seed: int) -> list[m.Event]:
    """A floor played offline by surveil.sim through the table side (shoe-reader parser,
    table-controller, settlement), every recorded event in publish order."""
    events: list[m.Event] = []
    recording = record(Floor(tables=tables, shoes=shoes, seed=seed), events.append, lambda label: None)
    assert not recording.dead_letters
    return events


def table_events(events: list[m.Event]) -> list[m.Event]:
    return [event for event in events if event.topic == topics.TABLE]


def settlement_events(events: list[m.Event]) -> list[m.Event]:
    return [event for event in events if event.topic == topics.SETTLEMENT]


def offline(events: list[m.Event]) -> Recomputation:
    """The uninterrupted offline settlement of the table events: the reference for the live one."""
    return recompute(codec.encode(event) for event in table_events(events))


def assert_published_once_each(deployment: Deployment, expected: list[m.Event]) -> None:
    published = deployment.settlement_events()
    twice = {event_id: n for event_id, n in Counter(e.id for e in published).items() if n > 1}
    assert twice == {}, f"{len(twice)} settlements published more than once"
    assert sorted(codec.encode(e) for e in published) == sorted(codec.encode(e) for e in expected)
