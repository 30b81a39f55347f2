"""Bets settled per second: through the real broker and Redis, and offline.

Live: a simulated floor's table events are loaded into fresh topics first; then ``surveil serve
settlement`` (a subprocess, as deployed) settles them into Redis and publishes the settlements.
The clock runs from its first batch in Redis to the moment Kafka has committed the last input
offset, i.e. every settlement is in the ledger and published (read_committed). The bench checks
the ledger against an offline settlement of the same events before it prints anything.

Offline: the same events through the same processor on the InProcessBus with a MemoryBackend
(what ``surveil reconcile`` does), one core.

Workload: 7 seats a table; each round every seat bets Player or Banker, and sometimes Tie (30 %)
or a pair (20 % each); ties carry the Player and Banker bets into the next round.

    ops/stack.sh up
    .venv/bin/python bench/settlement.py                     # 20 tables x 300 rounds
    .venv/bin/python bench/settlement.py --tables 10 --rounds 100 --offline-only
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.processes import Launched, stop
from surveil.core.money import Spot
from surveil.events import codec, topics
from surveil.events import models as m
from surveil.runtime import topic_admin
from surveil.runtime.access import PrefixAccess
from surveil.runtime.config import kafka_client_config
from surveil.runtime.inproc import InProcessBus
from surveil.runtime.state import MemoryBackend, RedisBackend
from surveil.settlement.ledger import NAMESPACE, Ledger
from surveil.settlement.processor import SettlementProcessor
from surveil.settlement.reconcile import compare
from unit.settlement.table_play import Bet, Bets, floor

SEATS = 7
AMOUNTS = (500, 1_000, 2_000, 5_000)


def seven_seats(seed: int) -> Bets:
    rng = random.Random(seed)

    def bets(_: int) -> list[Bet]:
        placed = []
        for seat in range(1, SEATS + 1):
            patron = f"P{seat:02d}-{rng.randrange(40)}"
            placed.append(Bet(patron, rng.choice((Spot.PLAYER, Spot.BANKER)), rng.choice(AMOUNTS), str(seat)))
            for spot, chance in ((Spot.TIE, 0.3), (Spot.PLAYER_PAIR, 0.2), (Spot.BANKER_PAIR, 0.2)):
                if rng.random() < chance:
                    placed.append(Bet(patron, spot, 500, str(seat)))
        return placed

    return bets


def offline(events: list[m.Event]) -> tuple[float, float, int, MemoryBackend]:
    """Seconds (wall, CPU) to settle ``events`` offline, the bets settled, and the ledger."""
    backend = MemoryBackend()
    bus = InProcessBus(backend)
    bus.attach(SettlementProcessor())
    settled = 0

    def count(event: m.Event) -> None:
        nonlocal settled
        settled += isinstance(event, m.BetSettled)

    bus.tap(count)
    start, cpu_start = time.perf_counter(), time.process_time()
    for first in range(0, len(events), 1000):
        bus.publish(events[first : first + 1000])
        bus.run()
    return time.perf_counter() - start, time.process_time() - cpu_start, settled, backend


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a running process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def live(events: list[m.Event], bootstrap: str, redis_url: str, instances: int) -> tuple[float, float]:
    """Seconds ``instances`` settlement processes (one consumer group) took to settle ``events``
    (loaded beforehand) into Redis and Kafka, and the CPU seconds they used meanwhile."""
    tag = f"bench-settlement-{uuid.uuid4().hex[:8]}"
    topic_prefix, redis_prefix = f"{tag}.", f"{tag}:"
    names = [topic_prefix + name for name in topics.ALL_TOPICS]
    topic_admin.create_topics(bootstrap, names)
    client = redis.Redis.from_url(redis_url)
    services: list[Launched] = []
    access = PrefixAccess(bootstrap, redis_url, topic_prefix, redis_prefix)  # the service as its own principal
    try:
        producer = KafkaProducer(**kafka_client_config(bootstrap), acks="all", enable_idempotence=True, linger_ms=20, batch_size=256 * 1024)
        for event in events:
            producer.send(topic_prefix + topics.TABLE, key=event.subject.encode(), value=codec.encode(event))
        producer.flush()
        producer.close()
        probe = KafkaConsumer(**kafka_client_config(bootstrap), group_id=topic_prefix + SettlementProcessor.name, enable_auto_commit=False)
        partitions = [TopicPartition(topic_prefix + topics.TABLE, p) for p in probe.partitions_for_topic(topic_prefix + topics.TABLE)]
        end = {tp: offset for tp, offset in probe.end_offsets(partitions).items() if offset}

        log = tempfile.NamedTemporaryFile(prefix="bench-settlement-", suffix=".log", delete=False)
        for number in range(1, instances + 1):
            env = {
                **os.environ,
                "KAFKA_BOOTSTRAP": bootstrap,
                "REDIS_URL": redis_url,
                "METRICS_PORT": "0",
                "TOPIC_PREFIX": topic_prefix,
                "REDIS_PREFIX": redis_prefix,
                "INSTANCE_ID": f"bench-{number}",
                "LOG_LEVEL": "WARNING",
            }
            env = access.env("settlement", env)
            services.append(Launched.serve("settlement", env, Path(log.name), append=True))

        def check_alive() -> None:
            if any(service.poll() is not None for service in services):
                raise SystemExit(f"a settlement process exited; see {log.name}")

        backend = RedisBackend(client, redis_prefix)
        # Every instance has its partitions when each has applied a batch (6 partitions, few instances).
        while len(backend.progress(NAMESPACE)) < min(instances, len(end)):
            check_alive()
            time.sleep(0.01)
        start, cpu_start = time.perf_counter(), sum(cpu_seconds(service.pid) for service in services)
        while any((probe.committed(tp) or 0) < offset for tp, offset in end.items()):
            check_alive()
            time.sleep(0.05)
        elapsed = time.perf_counter() - start
        cpu = sum(cpu_seconds(service.pid) for service in services) - cpu_start
        probe.close()

        *_, reference = offline(events)
        expected, stored = Ledger(reference), Ledger(backend)
        for shift in expected.shifts():
            differences = compare(expected.shift(shift), stored.shift(shift))
            assert not differences, differences[:5]
        return elapsed, cpu
    finally:
        stop(*services, timeout=30)
        access.close()
        doomed = list(client.scan_iter(match=redis_prefix + "*", count=1000))
        for first in range(0, len(doomed), 500):
            client.unlink(*doomed[first : first + 500])
        topic_admin.delete_topics(bootstrap, names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=300, help="rounds per table")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--instances", type=int, default=1, help="settlement processes in the consumer group")
    parser.add_argument("--offline-only", action="store_true")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = parser.parse_args()

    events = floor([f"BENCH-T{n:02d}" for n in range(1, args.tables + 1)], args.rounds, seven_seats(args.seed), seed=args.seed)
    seconds, cpu, bets, _ = offline(events)
    print(
        f"workload: {args.tables} tables x {args.rounds} rounds, {len(events):,} table events, {bets:,} bets settled "
        f"({bets / (args.tables * args.rounds):.1f} a round)"
    )
    print(
        f"offline (InProcessBus, MemoryBackend): {bets / seconds:,.0f} bets settled/s ({seconds:.2f} s); "
        f"{bets / cpu:,.0f} bets per CPU second"
    )
    if not args.offline_only:
        seconds, cpu = live(events, args.bootstrap, args.redis, args.instances)
        print(
            f"live ({args.instances} x surveil serve settlement, Kafka + Redis): {bets / seconds:,.0f} bets settled/s "
            f"({seconds:.2f} s), {len(events) / seconds:,.0f} table events/s; "
            f"the service used {cpu:.2f} CPU s: {bets / cpu:,.0f} bets per CPU second"
        )


if __name__ == "__main__":
    main()
