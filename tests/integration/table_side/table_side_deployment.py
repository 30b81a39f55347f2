"""A table side of its own on the shared broker and Redis: the test's topics (TOPIC_PREFIX) and
Redis keys (REDIS_PREFIX), ``surveil serve shoe-reader`` and ``surveil serve table-controller``
as subprocesses a test can kill -9 and start again, and the simulated floor played to them."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from kafka import KafkaConsumer, TopicPartition

from surveil.events import codec
from surveil.events import models as m
from surveil.runtime.access import FLOOR_SIMULATOR, PrefixAccess
from surveil.runtime.config import Settings, kafka_client_config
from surveil.runtime.kafka import Publisher
from surveil.runtime.signing import DeviceKeys
from surveil.sim.floor import Floor
from surveil.sim.live import LiveRun, ShoeGateway, play_live
from surveil.sim.record import record

ROOT = Path(__file__).resolve().parents[3]
SURVEIL = ROOT / ".venv" / "bin" / "surveil"
SCHEMAS = ROOT / "schemas"
SERVICES = ("shoe-reader", "table-controller")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@cache
def validator(type_name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / f"{type_name}.json").read_text(encoding="utf-8"))
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def offline(floor_args: dict[str, Any], topic: str) -> list[m.Event]:
    """What ``surveil simulate`` records on ``topic`` for the same floor."""
    events: list[m.Event] = []
    record(Floor(**floor_args), events.append, lambda label: None)
    return [e for e in events if e.topic == topic]


@dataclass
class TableSide:
    bootstrap: str
    redis_url: str
    topic_prefix: str
    redis_prefix: str
    logs: Path
    # Each service's and the simulator's own credentials and rights (tests/integration/conftest.py).
    access: PrefixAccess | None = None
    device_secret: str = "integration-test floor"  # the devices sign; the services check (DEVICE_KEY_SECRET)
    reader_port: int = field(default_factory=free_port)
    metrics_ports: dict[str, int] = field(default_factory=lambda: {name: free_port() for name in SERVICES})
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    starts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SERVICES, 0))

    def topic(self, name: str) -> str:
        return self.topic_prefix + name

    # ---- the services ----------------------------------------------------------------------------

    def start(self, service: str) -> None:
        running = self.processes.get(service)
        assert running is None or running.poll() is not None, f"{service} is running"
        self.starts[service] += 1
        env = {
            **os.environ,
            "KAFKA_BOOTSTRAP": self.bootstrap,
            "REDIS_URL": self.redis_url,
            "METRICS_PORT": str(self.metrics_ports[service]),
            "TOPIC_PREFIX": self.topic_prefix,
            "REDIS_PREFIX": self.redis_prefix,
            "INSTANCE_ID": "it-table-side",  # the same on every start: a restart fences the killed one
            "SHOE_READER_PORT": str(self.reader_port),
            "DEVICE_KEY_SECRET": self.device_secret,
        }
        if self.access is not None:
            env = self.access.env(service, env)
        log = (self.logs / f"{service}-{self.starts[service]}.log").open("wb")
        self.processes[service] = subprocess.Popen([str(SURVEIL), "serve", service], env=env, stdout=log, stderr=subprocess.STDOUT)
        if service == "shoe-reader":
            self._wait_for_port(service)

    def kill(self, service: str) -> None:
        """kill -9: no goodbye, no flush."""
        process = self.processes[service]
        process.kill()
        process.wait(timeout=30)

    def stop_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()

    def alive(self, service: str) -> bool:
        return self.processes[service].poll() is None

    def log_text(self) -> str:
        return "\n".join(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}" for path in sorted(self.logs.glob("*.log")))

    def _wait_for_port(self, service: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.processes[service].poll() is not None:
                raise RuntimeError(f"{service} exited:\n{self.log_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.reader_port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise TimeoutError(f"{service} does not listen on {self.reader_port}:\n{self.log_text()}")

    # ---- the floor ---------------------------------------------------------------------------------

    def play(self, floor: Floor, pace: float) -> LiveRun:
        settings = dataclasses.replace(Settings.from_env("floor-simulator"), kafka_bootstrap=self.bootstrap, topic_prefix=self.topic_prefix)
        if self.access is not None:
            settings = self.access.settings(settings, FLOOR_SIMULATOR)  # the devices' principal: baccarat.inputs only
        keys = DeviceKeys(self.device_secret)
        publisher = Publisher(settings, keys)

        async def go() -> LiveRun:
            gateway = ShoeGateway("127.0.0.1", self.reader_port)
            try:
                return await play_live(floor, publisher, gateway, pace, keys=keys)
            finally:
                await gateway.close()

        try:
            return asyncio.run(go())
        finally:
            publisher.close()

    def play_in_background(self, floor: Floor, pace: float) -> tuple[threading.Thread, dict[str, Any]]:
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["run"] = self.play(floor, pace)
            except BaseException as error:  # reported by the test
                outcome["error"] = error

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread, outcome

    # ---- reading the topics ------------------------------------------------------------------------

    def read(self, topic: str, expected: int, timeout: float = 180) -> list[m.Event]:
        """Every committed event on ``topic`` from the start, once ``expected`` of them are there
        (and no more arrive for a moment), or whatever is there at the timeout."""
        name = self.topic(topic)
        consumer = KafkaConsumer(**kafka_client_config(self.bootstrap), group_id=None, enable_auto_commit=False,
                                 isolation_level="read_committed", auto_offset_reset="earliest")
        try:
            consumer.assign([TopicPartition(name, p) for p in consumer.partitions_for_topic(name) or ()])
            events: list[m.Event] = []
            deadline = time.monotonic() + timeout
            quiet_since = time.monotonic()
            while time.monotonic() < deadline:
                batch = consumer.poll(timeout_ms=500)
                for records in batch.values():
                    events += [codec.decode(r.value) for r in records]
                if batch:
                    quiet_since = time.monotonic()
                elif len(events) >= expected and time.monotonic() - quiet_since > 2:
                    break
            return events
        finally:
            consumer.close()

    def count(self, topic: str) -> int:
        name = self.topic(topic)
        consumer = KafkaConsumer(**kafka_client_config(self.bootstrap), group_id=None)
        try:
            tps = [TopicPartition(name, p) for p in consumer.partitions_for_topic(name) or ()]
            return sum(consumer.end_offsets(tps).values())
        finally:
            consumer.close()
