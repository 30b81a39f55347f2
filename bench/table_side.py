"""The table side (shoe-reader + table-controller, on the real broker and Redis): how many tables
it keeps up with at real pace, and how many rounds a second it turns into table events at full
speed.

Each measurement gets its own deployment: fresh topics under a TOPIC_PREFIX, its own REDIS_PREFIX,
and `surveil serve shoe-reader` and `surveil serve table-controller` as subprocesses; all is
deleted afterwards. The simulated floor is played to it as `surveil simulate --live` plays it (but
its inputs sent through librdkafka, `floor_producer.py`): the shoes' lines over one TCP
connection to the shoe-reader, the inputs to `baccarat.inputs`; its
actions are generated before the clock starts, so the measurement has the sending in it, not the
simulation.

- Real pace: N tables, one round per ~50 s each (their starts spread over the first 50 s), played
  for --seconds. A round's latency is from when its result was due at the table (its simulated
  time on the wall clock) to when a consumer of `baccarat.table` got its `round.completed`: it
  covers the simulator, the shoe-reader, the controller and the broker. N is sustained when the
  p99 latency stays under 5 s and does not grow: the last third of the run (all tables dealing
  by then) no more than 1 s above the middle third.
- Full speed: the actions of T tables x 1 shoe, generated before the clock starts, sent as fast
  as the reader and the broker take them; rounds/s = rounds / (last round.completed - start).

    ops/stack.sh up
    .venv/bin/python bench/table_side.py                          # 6,000 tables for 180 s, then full speed
    .venv/bin/python bench/table_side.py --tables 6000,9000 --seconds 240 --full-speed-tables 0
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import os
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import redis
from kafka import KafkaConsumer, TopicPartition

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from floor_producer import floor_publisher
from support.processes import Launched, free_port, listening, stop
from surveil.events import codec, topics
from surveil.events import models as m
from surveil.events.signing import DeviceKeys
from surveil.events.topics import ALL_TOPICS
from surveil.runtime.access import FLOOR_SIMULATOR, PrefixAccess
from surveil.runtime.config import Settings, kafka_client_config
from surveil.runtime.devices import KeyStore
from surveil.runtime.kafka import Publisher
from surveil.runtime.topic_admin import create_topics, delete_topics
from surveil.sim.floor import Floor
from surveil.sim.live import LiveRun, ShoeGateway, play_live
from surveil.sim.table import ROUND_SECONDS, START, TableInput

SUSTAINED_P99_SECONDS = 5.0


class Issuing:
    """A key store that issues a device's key the first time it is asked for it."""

    def __init__(self, store: KeyStore) -> None:
        self.store = store

    def get(self, device: str) -> bytes:
        return self.store.get(device) or self.store.issue(device)


@dataclass
class Deployment:
    """A table side of its own: topics, Redis keys and the two services."""

    bootstrap: str
    redis_url: str
    prefix: str = field(default_factory=lambda: f"bench-{uuid.uuid4().hex[:8]}.")
    reader_port: int = field(default_factory=free_port)
    logs: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="bench-table-side-")))
    controllers: int = 1  # table-controller instances: one consumer group, the tables' partitions split among them
    processes: dict[str, Launched] = field(default_factory=dict)
    access: PrefixAccess | None = None  # each service as its own principal (docs/security.md)

    @property
    def keys(self) -> DeviceKeys:
        """The floor's devices' own keys, each issued into the deployment's key store the first
        time the device signs (the services check with that store)."""
        return DeviceKeys(Issuing(KeyStore(self.logs / "device-keys")))

    def __enter__(self) -> Deployment:
        create_topics(self.bootstrap, [self.prefix + t for t in ALL_TOPICS])
        (self.logs / "device-keys").mkdir(mode=0o700)
        self.access = PrefixAccess(self.bootstrap, self.redis_url, self.prefix, self.prefix)
        instances = [("shoe-reader", "shoe-reader")] + [
            ("table-controller", f"table-controller-{n}") for n in range(1, self.controllers + 1)
        ]
        for service, name in instances:
            env = {
                **os.environ,
                "KAFKA_BOOTSTRAP": self.bootstrap,
                "REDIS_URL": self.redis_url,
                "TOPIC_PREFIX": self.prefix,
                "REDIS_PREFIX": self.prefix,
                "METRICS_PORT": str(free_port()),
                "SHOE_READER_PORT": str(self.reader_port),
                "INSTANCE_ID": name,
                "LOG_LEVEL": "WARNING",
                "DEVICE_KEYS": str(self.logs / "device-keys"),
            }
            env = self.access.env(service, env)
            self.processes[name] = Launched.serve(service, env, self.logs / f"{name}.log")
        self.processes["shoe-reader"].wait_ready(
            listening(self.reader_port), "the shoe-reader", f"does not listen; logs in {self.logs}", pause=0.2
        )
        return self

    def __exit__(self, *_: object) -> None:
        stop(*self.processes.values(), timeout=30)
        if self.access is not None:
            self.access.close()
        delete_topics(self.bootstrap, [self.prefix + t for t in ALL_TOPICS])
        client = redis.Redis.from_url(self.redis_url)
        doomed = list(client.scan_iter(match=self.prefix + "*", count=1000))
        for i in range(0, len(doomed), 500):
            client.unlink(*doomed[i : i + 500])

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time each service used so far (user + system, from /proc)."""
        tick = os.sysconf("SC_CLK_TCK")
        used: dict[str, float] = {}
        for name, process in self.processes.items():
            fields = Path(f"/proc/{process.pid}/stat").read_text().rpartition(")")[2].split()
            service = "shoe-reader" if name == "shoe-reader" else "table-controller"
            used[service] = used.get(service, 0.0) + (int(fields[11]) + int(fields[12])) / tick
        return used

    def publisher(self) -> Publisher:
        settings = dataclasses.replace(Settings.from_env("floor-simulator"), kafka_bootstrap=self.bootstrap, topic_prefix=self.prefix)
        if self.access is not None:
            settings = self.access.settings(settings, FLOOR_SIMULATOR)
        return floor_publisher(dataclasses.replace(settings, kafka_linger_ms=20), self.keys)


class Completions(threading.Thread):
    """Consumes `baccarat.table` and notes when each `round.completed` arrived."""

    def __init__(self, deployment: Deployment) -> None:
        super().__init__(daemon=True)
        self.deployment = deployment
        self.arrivals: list[tuple[float, m.RoundCompleted]] = []  # (monotonic time, event)
        self.stop = threading.Event()

    def run(self) -> None:
        topic = self.deployment.prefix + topics.TABLE
        consumer = KafkaConsumer(
            **kafka_client_config(self.deployment.bootstrap),
            group_id=None,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
        )
        consumer.assign([TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()])
        consumer.seek_to_beginning()
        while not self.stop.is_set():
            for records in consumer.poll(timeout_ms=200).values():
                now = time.monotonic()
                for record in records:
                    if b'"baccarat.round.completed"' in record.value:
                        event = codec.decode(record.value)
                        assert isinstance(event, m.RoundCompleted)
                        self.arrivals.append((now, event))
        consumer.close()


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile; infinite when nothing arrived (nothing was kept up with)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else math.inf


def prepared(tables: int, seed: int, seconds: float | None = None) -> SimpleNamespace:
    """The floor's actions (up to ``seconds`` of table time), generated before the clock starts,
    so that the simulator's own work is not in the measurement."""
    actions = []
    for action in Floor(tables, shoes=1, seed=seed).actions():
        if seconds is not None and (action.time - START).total_seconds() > seconds:
            break
        actions.append(action)
    return SimpleNamespace(
        actions=lambda: iter(actions),
        count=len(actions),
        rounds=sum(isinstance(a, TableInput) and isinstance(a.event, m.Result) for a in actions),
    )


def real_pace(bootstrap: str, redis_url: str, tables: int, seconds: float, controllers: int) -> dict[str, Any]:
    floor = prepared(tables, 1, seconds)
    with Deployment(bootstrap, redis_url, controllers=controllers) as deployment:
        completions = Completions(deployment)
        completions.start()
        publisher = deployment.publisher()
        clock: dict[str, float] = {}

        async def play() -> Any:
            gateway = ShoeGateway("127.0.0.1", deployment.reader_port)
            clock["began"] = time.monotonic()
            run = LiveRun()
            try:
                await asyncio.wait_for(play_live(floor, publisher, gateway, ROUND_SECONDS, run=run, keys=publisher.keys), seconds + 60)  # type: ignore[arg-type]
            except TimeoutError:
                pass
            finally:
                await gateway.close()
            return run

        cpu_before, driver_before = deployment.cpu_seconds(), time.process_time()
        run = asyncio.run(play())
        publisher.close()
        time.sleep(15)  # the last rounds of the window, through to the table topic
        cpu = {name: used - cpu_before[name] for name, used in deployment.cpu_seconds().items()}
        cpu["simulator"] = time.process_time() - driver_before
        completions.stop.set()
        completions.join()
        began = clock["began"]
        window = [(arrived, event) for arrived, event in completions.arrivals if (event.time - START).total_seconds() <= seconds]
        latencies = [(due, arrived - (began + due)) for arrived, event in window for due in [(event.time - START).total_seconds()]]
        middle = [lat for due, lat in latencies if seconds / 3 <= due < 2 * seconds / 3]
        last = [lat for due, lat in latencies if due >= 2 * seconds / 3]
        values = [lat for _, lat in latencies]
        p99 = percentile(values, 0.99)
        return {
            "tables": tables,
            "rounds": len(window),
            "rounds_per_s": len(window) / seconds,
            "p50": percentile(values, 0.50),
            "p99": p99,
            "max": max(values, default=math.inf),
            "p99_middle_third": percentile(middle, 0.99),
            "p99_last_third": percentile(last, 0.99),
            "cpu_share": {name: used / (seconds + 15) for name, used in cpu.items()},
            "simulator_behind": run.most_behind,
            "sustained": p99 < SUSTAINED_P99_SECONDS and percentile(last, 0.99) <= percentile(middle, 0.99) + 1.0,
        }


def full_speed(bootstrap: str, redis_url: str, tables: int, controllers: int) -> dict[str, Any]:
    floor = prepared(tables, 2)
    rounds = floor.rounds
    with Deployment(bootstrap, redis_url, controllers=controllers) as deployment:
        completions = Completions(deployment)
        completions.start()
        publisher = deployment.publisher()

        async def play() -> None:
            gateway = ShoeGateway("127.0.0.1", deployment.reader_port)
            try:
                await play_live(floor, publisher, gateway, pace=0, keys=publisher.keys)  # type: ignore[arg-type]
            finally:
                await gateway.close()

        started, cpu_before, driver_before = time.monotonic(), deployment.cpu_seconds(), time.process_time()
        asyncio.run(play())
        sent = time.monotonic()
        publisher.close()
        deadline = time.monotonic() + 600
        while len(completions.arrivals) < rounds and time.monotonic() < deadline:
            time.sleep(0.2)
        cpu = {name: used - cpu_before[name] for name, used in deployment.cpu_seconds().items()}
        cpu["simulator"] = time.process_time() - driver_before
        completions.stop.set()
        completions.join()
        last = max(arrived for arrived, _ in completions.arrivals)
        return {
            "cpu_ms_per_round": {name: 1000 * used / rounds for name, used in cpu.items()},
            "tables": tables,
            "rounds": rounds,
            "completed": len(completions.arrivals),
            "events_sent": floor.count,
            "send_seconds": sent - started,
            "seconds": last - started,
            "rounds_per_s": len(completions.arrivals) / (last - started),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--tables", default="6000", help="comma-separated table counts to try at real pace (empty: none)")
    parser.add_argument("--seconds", type=float, default=180, help="length of each real-pace run")
    parser.add_argument("--full-speed-tables", type=int, default=200, help="tables (one shoe each) for the full-speed run (0: none)")
    parser.add_argument("--controllers", type=int, default=1, help="table-controller instances")
    args = parser.parse_args()
    for tables in [int(n) for n in args.tables.split(",") if n]:
        r = real_pace(args.bootstrap, args.redis, tables, args.seconds, args.controllers)
        print(
            f"real pace, {r['tables']} tables, {args.controllers} controller(s), {args.seconds:.0f} s: {r['rounds']} rounds ({r['rounds_per_s']:.1f}/s); "
            f"latency p50 {r['p50']:.2f} s, p99 {r['p99']:.2f} s (middle third {r['p99_middle_third']:.2f}, last third "
            f"{r['p99_last_third']:.2f}), max {r['max']:.2f} s; {'sustained' if r['sustained'] else 'NOT sustained'}; CPU "
            + ", ".join(f"{name} {share:.0%}" for name, share in r["cpu_share"].items())
            + f" of a core; the simulator at worst {r['simulator_behind']:.1f} s behind",
            flush=True,
        )
    if args.full_speed_tables:
        r = full_speed(args.bootstrap, args.redis, args.full_speed_tables, args.controllers)
        print(
            f"full speed, {r['tables']} tables x 1 shoe, {args.controllers} controller(s): {r['completed']}/{r['rounds']} rounds completed in {r['seconds']:.1f} s "
            f"= {r['rounds_per_s']:.0f} rounds/s ({r['events_sent']} lines and inputs sent in {r['send_seconds']:.1f} s); CPU ms "
            f"per round: " + ", ".join(f"{name} {ms:.2f}" for name, ms in r["cpu_ms_per_round"].items()),
            flush=True,
        )


if __name__ == "__main__":
    main()
