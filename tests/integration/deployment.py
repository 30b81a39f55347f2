"""A deployment of the test's own on the session's broker and Redis: the test's topics (its
TOPIC_PREFIX) and Redis keys (its REDIS_PREFIX), any of ``surveil serve shoe-reader``,
``table-controller``, ``settlement`` and ``anomaly-detection`` as subprocesses, each logged in as
its own principal with the ACLs of the prefix (``PrefixAccess``), that a test starts, kills -9
and starts again; a simulated floor played live to them (the shoes' lines over TCP to the
shoe-reader, the inputs signed to ``baccarat.inputs``), each device with its own key, issued into
the deployment's key store the first time it signs; and what they published, read back.

The table-side, settlement, detection and faults tests all use ``Deployment``; the module also has
the offline references they compare with: the events ``surveil simulate`` records for a floor
(``offline_events``, ``simulated_floor``), and the settlement of those events in memory
(``offline_settlement``, ``dump_memory``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import redis
from jsonschema import Draft202012Validator
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from support.processes import Launched, free_port, listening, stop
from surveil.embedded.record import record
from surveil.events import codec, topics
from surveil.events import models as m
from surveil.events.signing import DeviceKeys
from surveil.runtime.access import FLOOR_SIMULATOR, SETTLEMENT_SERVICE, TABLE_CONTROLLER, PrefixAccess, redis_rules, set_redis_user
from surveil.runtime.alert_keys import PRIVATE_FILE, PUBLIC_FILE, AlertVerifier, generate
from surveil.runtime.config import Settings, kafka_client_config
from surveil.runtime.devices import KeyStore
from surveil.runtime.kafka import Publisher
from surveil.runtime.state import MemoryBackend, RedisBackend, State
from surveil.settlement.ledger import NAMESPACE as SETTLEMENT_NAMESPACE
from surveil.settlement.ledger import Ledger
from surveil.settlement.reconcile import Recomputation, recompute
from surveil.sim.floor import Floor
from surveil.sim.live import LiveRun, ShoeGateway, play_live

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
SERVICES = ("shoe-reader", "table-controller", "settlement", "anomaly-detection")
# What each consuming service reads: its consumer group is <prefix><service> (faust's app id for
# anomaly-detection), and it has caught up when the group committed the end of each of them.
CONSUMES = {
    "table-controller": (topics.SHOE, topics.INPUTS),
    "settlement": (topics.TABLE,),
    "anomaly-detection": (topics.SHOE, topics.TABLE, topics.SETTLEMENT),
}
INSTANCE_ID = "it"  # the same on every start: a restarted service fences the one killed before it


class Provisioned:
    """The test's devices: each gets a key of its own, issued into the key store (as
    ``surveil keys issue`` does) the first time it signs."""

    def __init__(self, store: KeyStore) -> None:
        self.store = store

    def get(self, device: str) -> bytes:
        return self.store.get(device) or self.store.issue(device)


@cache
def validator(type_name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / f"{type_name}.json").read_text(encoding="utf-8"))
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


@dataclass
class Deployment:
    bootstrap: str
    redis_url: str  # the operator's (Redis' admin); each service gets its own user's
    topic_prefix: str
    redis_prefix: str
    logs: Path
    # Each service's and the simulator's own credentials and rights (tests/integration/conftest.py).
    access: PrefixAccess | None = None
    env: dict[str, str] = field(default_factory=dict)  # more environment for every service
    reader_port: int = field(default_factory=free_port)
    metrics_ports: dict[str, int] = field(default_factory=lambda: {name: free_port() for name in SERVICES})
    processes: dict[str, Launched] = field(default_factory=dict)
    starts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SERVICES, 0))
    stopped: set[int] = field(default_factory=set)  # pids the test killed or stopped itself

    def topic(self, name: str) -> str:
        return self.topic_prefix + name

    @property
    def key_store(self) -> KeyStore:
        return KeyStore(self.logs / "device-keys")

    @property
    def alert_keys(self) -> Path:
        """The detectors' alert-signing key pair (made on first use): anomaly-detection gets the
        private key, a test verifies with the public one."""
        folder = self.logs / "alert-signing"
        if not (folder / PRIVATE_FILE).exists():
            generate(folder)
        return folder

    def alert_verifier(self) -> AlertVerifier:
        return AlertVerifier.from_files([self.alert_keys / PUBLIC_FILE])

    # ---- the services ------------------------------------------------------------------------

    def service_env(self, service: str) -> dict[str, str]:
        self.key_store.root.mkdir(mode=0o700, exist_ok=True)
        env = {
            **os.environ,
            "KAFKA_BOOTSTRAP": self.bootstrap,
            "REDIS_URL": self.redis_url,
            "METRICS_PORT": str(self.metrics_ports[service]),
            "TOPIC_PREFIX": self.topic_prefix,
            "REDIS_PREFIX": self.redis_prefix,
            "INSTANCE_ID": INSTANCE_ID,
            "SHOE_READER_PORT": str(self.reader_port),
            "DEVICE_KEYS": str(self.key_store.root),  # the devices sign; the shoe-reader and table-controller check
            "FAUST_DATADIR": str(self.logs / "faust"),
            **self.env,
        }
        if service == "anomaly-detection":
            env["ALERT_SIGNING_KEY"] = str(self.alert_keys / PRIVATE_FILE)
        return env if self.access is None else self.access.env(service, env)

    def start(self, service: str) -> Launched:
        assert service in SERVICES, service
        running = self.processes.get(service)
        assert running is None or running.poll() is not None, f"{service} is running"
        self.starts[service] += 1
        process = Launched.serve(service, self.service_env(service), self.logs / f"{service}-{self.starts[service]}.log")
        self.processes[service] = process
        if service == "shoe-reader":
            process.wait_ready(listening(self.reader_port), service, f"does not listen on {self.reader_port}", logs=self.log_text)
        return process

    def start_all(self, services: Iterable[str] = SERVICES) -> None:
        for service in services:
            self.start(service)

    def kill(self, service: str) -> None:
        """kill -9: no goodbye, no flush, no clean-up of any kind."""
        process = self.processes[service]
        self.stopped.add(process.pid)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)

    def restart(self, service: str, pause: float = 0.0) -> None:
        """kill -9, then (after ``pause`` seconds) a new process in its place."""
        self.kill(service)
        time.sleep(pause)
        self.start(service)

    def stop(self, service: str) -> None:
        """SIGTERM, as an operator stops a service (SIGKILL after 20 s)."""
        process = self.processes.get(service)
        if process is not None and process.poll() is None:
            self.stopped.add(process.pid)
            stop(process)

    def stop_all(self) -> None:
        for service in list(self.processes):
            self.stop(service)

    def alive(self, service: str) -> bool:
        process = self.processes.get(service)
        return process is not None and process.poll() is None

    def exited(self) -> list[str]:
        """The services that stopped running without the test stopping them (they failed)."""
        return [service for service, process in self.processes.items() if process.poll() is not None and process.pid not in self.stopped]

    def log_text(self, chars: int = 3000) -> str:
        """The tail of every service log of the test (for an assertion's message)."""
        return "\n".join(f"--- {path.name}\n{path.read_text(errors='replace')[-chars:]}" for path in sorted(self.logs.glob("*.log")))

    def log_tail(self, service: str = SETTLEMENT_SERVICE, lines: int = 30) -> str:
        path = self.logs / f"{service}-{self.starts[service]}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def restore_redis_users(self) -> None:
        """Make the test's Redis users again, with the passwords the services were started with:
        they are made at run time (ACL SETUSER), so a restarted Redis has forgotten them, as a
        deployment's Redis, whose users are in its configuration, would not."""
        if self.access is None or not self.access.redis_users:
            return
        client = redis.Redis.from_url(self.redis_url)
        try:
            for service, password in self.access.redis_users.items():
                set_redis_user(client, self.access.redis_user(service), password, redis_rules(service, self.redis_prefix))
        finally:
            client.close()

    # ---- the floor ---------------------------------------------------------------------------

    def device_keys(self) -> DeviceKeys:
        """The floor's devices' keys, each issued into the key store when the device first signs."""
        return DeviceKeys(Provisioned(self.key_store))

    def client_settings(self, principal: str = FLOOR_SIMULATOR) -> Settings:
        """A client's settings in this deployment, logged in as ``principal``."""
        settings = dataclasses.replace(Settings.from_env(principal), kafka_bootstrap=self.bootstrap, topic_prefix=self.topic_prefix)
        return settings if self.access is None else self.access.settings(settings, principal)

    def publisher(self, principal: str = FLOOR_SIMULATOR, keys: DeviceKeys | None = None, **overrides: Any) -> Publisher:
        """A publisher as ``principal`` (the floor's devices by default, signing with ``keys``;
        ``overrides``: the producer's settings)."""
        return Publisher(self.client_settings(principal), keys, **overrides)

    def play(self, floor: Floor, pace: float, inputs: Callable[[Publisher], Any] = lambda publisher: publisher) -> LiveRun:
        """Play ``floor`` (anything with ``actions()``) live: its shoes' lines, signed, to the
        shoe-reader; its inputs, signed, to ``baccarat.inputs`` as the floor simulator, through
        ``inputs(publisher)`` (anything with ``publish`` and ``flush``: the publisher itself by
        default; a test's disturbance of them)."""
        keys = self.device_keys()
        # A device keeps trying while the broker is away: a broker killed in a test can take
        # longer than the publisher's two minutes to come back on a busy machine.
        publisher = self.publisher(FLOOR_SIMULATOR, keys, delivery_timeout_ms=900_000)

        async def go() -> LiveRun:
            gateway = ShoeGateway("127.0.0.1", self.reader_port)
            try:
                return await play_live(floor, inputs(publisher), gateway, pace, keys=keys)
            finally:
                await gateway.close()

        try:
            return asyncio.run(go())
        finally:
            publisher.close()

    def play_in_background(
        self, floor: Floor, pace: float, inputs: Callable[[Publisher], Any] = lambda publisher: publisher
    ) -> tuple[threading.Thread, dict[str, Any]]:
        """``play`` in a thread; the outcome dict gets ``run`` (the LiveRun) or ``error``."""
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["run"] = self.play(floor, pace, inputs)
            except BaseException as error:  # reported by the test
                outcome["error"] = error

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread, outcome

    # ---- input as the operator -----------------------------------------------------------------

    def publish(self, events: Iterable[m.Event], topic: str | None = None) -> None:
        """``events`` to their topics (or all to ``topic``), keyed by table, as the admin."""
        self.publish_raw(((event.topic if topic is None else topic), event.subject.encode(), codec.encode(event)) for event in events)

    def publish_raw(self, records: Iterable[tuple[str, bytes, bytes] | tuple[bytes, bytes]], topic: str = topics.TABLE) -> None:
        """Records ``(key, value)`` to ``topic``, or ``(topic, key, value)``, as the admin."""
        producer = KafkaProducer(**kafka_client_config(self.bootstrap), acks="all", enable_idempotence=True, linger_ms=20)
        try:
            for item in records:
                name, key, value = item if len(item) == 3 else (topic, *item)  # type: ignore[misc]
                producer.send(self.topic(name), key=key, value=value)
            producer.flush(timeout=60)
        finally:
            producer.close()

    def as_service(self, settings: Settings, principal: str = SETTLEMENT_SERVICE) -> Settings:
        """``settings`` logged in as ``principal``, for a runner in the test's own process."""
        return settings if self.access is None else self.access.settings(settings, principal)  # type: ignore[no-any-return]

    # ---- reading the topics --------------------------------------------------------------------

    def partitions(self, name: str) -> list[TopicPartition]:
        consumer = KafkaConsumer(**kafka_client_config(self.bootstrap))
        try:
            return [TopicPartition(self.topic(name), p) for p in sorted(consumer.partitions_for_topic(self.topic(name)) or ())]
        finally:
            consumer.close()

    def read(self, topic: str, expected: int = 0, timeout: float = 180) -> list[m.Event]:
        """Every committed event on ``topic`` from the start, once ``expected`` of them are there
        (and no more arrive for a moment), or whatever is there at the timeout."""
        return [codec.decode(value) for value in self.read_values(topic, expected, timeout)]

    def read_values(self, topic: str, expected: int = 0, timeout: float = 180) -> list[bytes]:
        """``read``, the records' bytes undecoded."""
        name = self.topic(topic)
        consumer = KafkaConsumer(
            **kafka_client_config(self.bootstrap),
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
        )
        try:
            consumer.assign([TopicPartition(name, p) for p in consumer.partitions_for_topic(name) or ()])
            values: list[bytes] = []
            deadline = time.monotonic() + timeout
            quiet_since = time.monotonic()
            while time.monotonic() < deadline:
                batch = consumer.poll(timeout_ms=500)
                for records in batch.values():
                    values += [r.value for r in records]
                if batch:
                    quiet_since = time.monotonic()
                elif len(values) >= expected and time.monotonic() - quiet_since > 2:
                    break
            return values
        finally:
            consumer.close()

    def records(self, name: str, timeout: float = 60) -> list[Any]:
        """Every committed record on the topic (read_committed), from the start to its end now."""
        consumer = KafkaConsumer(**kafka_client_config(self.bootstrap), isolation_level="read_committed", enable_auto_commit=False)
        try:
            partitions = self.partitions(name)
            consumer.assign(partitions)
            consumer.seek_to_beginning(*partitions)
            end = consumer.end_offsets(partitions)
            records: list[Any] = []
            deadline = time.monotonic() + timeout
            while any(consumer.position(tp) < end[tp] for tp in partitions):
                assert time.monotonic() < deadline, "could not read the topic to its end"
                for batch in consumer.poll(timeout_ms=500).values():
                    records.extend(batch)
            return records
        finally:
            consumer.close()

    def count(self, topic: str) -> int:
        """Records on ``topic`` (its end offsets summed: transaction markers included)."""
        return sum(self.end_offsets(topic).values())

    def settlement_events(self) -> list[m.Event]:
        return [codec.decode(record.value) for record in self.records(topics.SETTLEMENT)]

    # ---- progress ------------------------------------------------------------------------------

    def end_offsets(self, name: str, committed_only: bool = False) -> dict[TopicPartition, int]:
        isolation = "read_committed" if committed_only else "read_uncommitted"
        consumer = KafkaConsumer(**kafka_client_config(self.bootstrap), isolation_level=isolation)
        try:
            return dict(consumer.end_offsets(self.partitions(name)))
        finally:
            consumer.close()

    def committed_offsets(self, service: str = SETTLEMENT_SERVICE, topic: str | None = None) -> dict[TopicPartition, int]:
        """The service's consumer group's committed offsets on ``topic`` (default: everything it
        consumes), read without joining the group."""
        consumer = KafkaConsumer(**kafka_client_config(self.bootstrap), group_id=self.topic_prefix + service, enable_auto_commit=False)
        try:
            wanted = [tp for name in ((topic,) if topic else CONSUMES[service]) for tp in self.partitions(name)]
            committed = {tp: consumer.committed(tp) for tp in wanted}
            return {tp: offset for tp, offset in committed.items() if offset is not None}
        finally:
            consumer.close()

    def applied_offsets(self, service: str = SETTLEMENT_SERVICE) -> dict[str, int]:
        """What the service applied to Redis, per ``topic:partition`` (its runner's progress)."""
        return self.redis_backend().progress(service)

    def data_ends(self, name: str) -> dict[TopicPartition, int]:
        """Per partition of the topic, the offset after its last committed event: the end offset,
        unless the partition ends with a transaction's marker (a consumer has read everything
        once it committed the marker's offset)."""
        ends = self.end_offsets(name)
        consumer = KafkaConsumer(**kafka_client_config(self.bootstrap), isolation_level="read_committed", enable_auto_commit=False)
        try:
            found: dict[TopicPartition, int] = {}
            for tp, end in ends.items():
                consumer.assign([tp])
                last, start, window = -1, end, 20
                while last < 0 and start > 0:  # back until an event (aborted ones are skipped)
                    start = max(end - window, 0)
                    consumer.seek(tp, start)
                    while consumer.position(tp) < end:
                        for record in consumer.poll(timeout_ms=500).get(tp, []):
                            last = record.offset
                    window *= 10
                found[tp] = last + 1
            return found
        finally:
            consumer.close()

    def wait_until_consumed(self, service: str = SETTLEMENT_SERVICE, timeout_s: float = 180, check_alive: bool = True) -> None:
        """Until the service's group committed, in Kafka, the end of every topic it consumes (the
        marker of a last transaction aside): all of its input is applied and its outputs are out."""
        wanted = {tp: end for name in CONSUMES[service] for tp, end in self.data_ends(name).items() if end}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            committed = self.committed_offsets(service)
            if all(committed.get(tp, 0) >= end for tp, end in wanted.items()):
                return
            if check_alive and service in self.processes:
                assert self.alive(service), f"{service} died:\n{self.log_tail(service)}"
            time.sleep(0.2)
        raise AssertionError(
            f"{service} has not consumed its input after {timeout_s} s: committed {self.committed_offsets(service)}, "
            f"wanted {wanted}\n{self.progress_metrics(service)}\n{self.log_tail(service)}"
        )

    def metric_samples(self, service: str) -> list[tuple[str, dict[str, str], float]]:
        """The service's /metrics, parsed: (name, labels, value) per sample."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_ports[service]}/metrics", timeout=10) as response:
            text = response.read().decode()
        return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples]

    def progress_metrics(self, service: str) -> str:
        """What the service says it processed and committed (its /metrics), for telling a worker
        that stopped processing from one whose commits stopped."""
        try:
            found = self.metric_samples(service)
        except OSError as error:
            return f"{service} /metrics unreadable: {error}"
        wanted = (
            "surveil_events_consumed_total",
            "surveil_detection_latency_seconds_count",
            "surveil_detection_commit_seconds_count",
            "surveil_detection_commit_seconds_sum",
            "surveil_batch_seconds_count",
        )
        return "\n".join(f"{name}{labels or ''} {value}" for name, labels, value in found if name in wanted)

    def wait_until_settled(self, timeout_s: float = 180) -> None:
        """Until settlement committed, in Kafka, every input offset: the ledger and the outputs
        of the whole input are in."""
        self.wait_until_consumed(SETTLEMENT_SERVICE, timeout_s)

    # ---- the ledger --------------------------------------------------------------------------

    def redis_backend(self) -> RedisBackend:
        return RedisBackend(redis.Redis.from_url(self.redis_url), self.redis_prefix)

    def ledger(self) -> Ledger:
        return Ledger(self.redis_backend())

    def dump(self, namespace: str = SETTLEMENT_NAMESPACE) -> dict[str, Any]:
        """Every key of ``namespace`` in Redis but the runner's own (progress, outbox, the offsets
        its transactions committed): values as bytes, hashes as dicts of ints."""
        client = redis.Redis.from_url(self.redis_url)
        try:
            found: dict[str, Any] = {}
            start = len(self.redis_prefix)
            for raw_key in client.scan_iter(match=f"{self.redis_prefix}{namespace}:*", count=1000):
                key = raw_key.decode()[start:]
                if key.startswith((f"{namespace}:progress", f"{namespace}:outbox:", f"{namespace}:published:")):
                    continue
                if client.type(raw_key) == b"hash":
                    found[key] = {k.decode(): int(v) for k, v in client.hgetall(raw_key).items()}
                else:
                    found[key] = client.get(raw_key)
            return found
        finally:
            client.close()


# ---- the offline references ---------------------------------------------------------------------


def offline_events(floor_args: dict[str, Any], topic: str | None = None) -> list[m.Event]:
    """What ``surveil simulate`` records for the same floor (``Floor(**floor_args)``), on ``topic``
    or on every recorded topic, in publish order."""
    events: list[m.Event] = []
    record(Floor(**floor_args), events.append, lambda label: None)
    return [e for e in events if topic is None or e.topic == topic]


def simulated_floor(tables: int, shoes: int, seed: int) -> list[m.Event]:
    """A floor played offline by surveil.sim through the table side (shoe-reader parser,
    table-controller, settlement), every recorded event in publish order."""
    events: list[m.Event] = []
    recording = record(Floor(tables=tables, shoes=shoes, seed=seed), events.append, lambda label: None)
    assert not recording.dead_letters
    return events


SETTLEMENT_INPUTS = (m.RoundOpened, m.BetPlaced, m.BetChanged, m.BetWithdrawn, m.RoundCompleted, m.RoundVoided)


def table_events(events: Sequence[m.Event]) -> list[m.Event]:
    return [event for event in events if event.topic == topics.TABLE]


def settlement_events(events: Sequence[m.Event]) -> list[m.Event]:
    return [event for event in events if event.topic == topics.SETTLEMENT]


def offline_settlement(events: Sequence[m.Event]) -> Recomputation:
    """The uninterrupted offline settlement of the table events: the reference for the live one."""
    return recompute(codec.encode(event) for event in table_events(events))


def dump_memory(backend: MemoryBackend) -> dict[str, Any]:
    """``Deployment.dump``'s view of a ledger computed in memory."""
    return {**backend.data, **{key: dict(values) for key, values in backend.hashes.items() if values}}


def assert_published_once_each(deployment: Deployment, expected: list[m.Event]) -> None:
    published = deployment.settlement_events()
    twice = {event_id: n for event_id, n in Counter(e.id for e in published).items() if n > 1}
    assert twice == {}, f"{len(twice)} settlements published more than once"
    assert sorted(codec.encode(e) for e in published) == sorted(codec.encode(e) for e in expected)


class Relay:
    """Each shoe event and input becomes one table event, in the order the runner hands them over
    (as the table-controller, whose rights and group it takes): what it publishes is in the
    runner's order alone."""

    name: ClassVar[str] = TABLE_CONTROLLER
    consumes: ClassVar[tuple[str, ...]] = (topics.SHOE, topics.INPUTS)

    def process(self, event: m.Event, state: State) -> Sequence[m.Event]:
        data = m.CardsBurnedData(table_id=event.subject, shoe_id="S-relay", round_id=None, indices=[1])
        return [codec.make(m.CardsBurned, data, id=f"{event.id}/relayed", source="relay", time=event.time)]
