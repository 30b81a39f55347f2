"""The test infrastructure itself, against the real broker and Redis: the fixtures isolate, the
topics are as ops/stack.sh promises, and a broker killed under load loses no acknowledged event.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import RetriableError

from surveil.events import topics
from surveil.events.topics import ALL_TOPICS
from surveil.runtime.config import kafka_client_config
from surveil.runtime.topic_admin import partition_counts

ROOT = Path(__file__).resolve().parents[2]

# Fail fast on a dead broker in the simple tests; back off at most 1 s between reconnects
# (kafka-python's default goes up to 30 s, which would make the restart test crawl).
CLIENT = {"reconnect_backoff_ms": 50, "reconnect_backoff_max_ms": 1000}


def reliable_producer(bootstrap: str, **overrides: object) -> KafkaProducer:
    return KafkaProducer(**kafka_client_config(bootstrap), acks="all", enable_idempotence=True, linger_ms=5, **{**CLIENT, **overrides})


def group_consumer(bootstrap: str, topic: str, group: str) -> KafkaConsumer:
    """A consumer in ``group`` subscribed to ``topic``, from the start when nothing is committed.

    It fetches the topic's metadata before subscribing: with kafka-python 3.0.12, a consumer
    subscribed to a topic created a moment before sometimes joins the group before it knows the
    topic's partitions, gets none assigned ("No partition metadata for topic"), and stays so for
    minutes (seen in 5 of 70 tries on a busy machine; 0 of 100 with this order).
    """
    consumer = KafkaConsumer(
        **kafka_client_config(bootstrap), group_id=group, auto_offset_reset="earliest", enable_auto_commit=False, **CLIENT
    )
    consumer.partitions_for_topic(topic)
    consumer.subscribe([topic])
    return consumer


def read_all(bootstrap: str, topic: str, group: str, expected: int, timeout_s: float = 30) -> list:
    """Consume ``topic`` from the start in ``group`` until ``expected`` records or timeout."""
    consumer = group_consumer(bootstrap, topic, group)
    records: list = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(records) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        consumer.commit()
    finally:
        consumer.close()
    return records


def test_the_system_topics_exist_with_the_shared_partition_count(kafka_bootstrap: str, kafka_partitions: int) -> None:
    assert partition_counts(kafka_bootstrap, ALL_TOPICS) == {t: kafka_partitions for t in ALL_TOPICS}


def test_unique_topics_are_fresh_copies_of_every_system_topic(
    kafka_bootstrap: str, unique_topics: dict[str, str], topic_prefix: str, kafka_partitions: int
) -> None:
    assert set(unique_topics) == set(ALL_TOPICS)
    assert all(name == topic_prefix + real for real, name in unique_topics.items())
    counts = partition_counts(kafka_bootstrap, unique_topics.values())
    assert counts == {name: kafka_partitions for name in unique_topics.values()}


def test_keyed_events_round_trip_in_order_per_table(kafka_bootstrap: str, unique_topics: dict[str, str], consumer_group: str) -> None:
    topic = unique_topics[topics.SHOE]
    tables = [f"T{n:02d}" for n in range(1, 9)]
    producer = reliable_producer(kafka_bootstrap)
    futures = []
    for i in range(400):
        table = tables[i % len(tables)]
        event = {"type": "baccarat.card.read", "subject": table, "data": {"index": i // len(tables) + 1}}
        futures.append(producer.send(topic, key=table.encode(), value=json.dumps(event).encode()))
    producer.flush(timeout=30)
    producer.close()
    assert all(f.succeeded() for f in futures)

    records = read_all(kafka_bootstrap, topic, consumer_group, expected=400)
    assert len(records) == 400
    by_table: dict[str, list[int]] = defaultdict(list)
    partitions: dict[str, set[int]] = defaultdict(set)
    for r in records:
        event = json.loads(r.value)
        assert r.key.decode() == event["subject"]
        by_table[event["subject"]].append(event["data"]["index"])
        partitions[event["subject"]].add(r.partition)
    # Keyed by table: each table on one partition, so its events come back in the order sent.
    assert all(len(p) == 1 for p in partitions.values())
    assert by_table == {t: list(range(1, 51)) for t in tables}


def test_redis_client_writes_and_reads_under_its_prefix(redis_client: redis.Redis, redis_prefix: str) -> None:
    key = redis_prefix + "ledger:R1"
    assert redis_client.hsetnx(key, "bet-1", 95)
    assert not redis_client.hsetnx(key, "bet-1", 95)  # what the settlement ledger relies on
    assert redis_client.hgetall(key) == {b"bet-1": b"95"}
    with redis_client.pipeline(transaction=True) as pipe:
        pipe.incrby(redis_prefix + "paid", 95).incrby(redis_prefix + "paid", 100)
        assert pipe.execute() == [95, 195]
    assert sorted(redis_client.scan_iter(match=redis_prefix + "*")) == [
        (redis_prefix + "ledger:R1").encode(),
        (redis_prefix + "paid").encode(),
    ]


def test_a_redis_killed_and_restarted_keeps_every_transaction_it_acknowledged(redis_url: str) -> None:
    """kill -9 of the stack's Redis, then a restart: what a service user wrote in MULTI/EXEC is
    there again (the append-only file replays it; see access.DEFAULT_USER_RULES)."""
    import os
    import uuid

    from surveil.runtime import access

    password = access.redis_passwords()[access.SETTLEMENT_SERVICE]
    if not password or f":{os.environ.get('REDIS_PORT', '6379')}/" not in redis_url or not (ROOT / ".stack/redis/redis.pid").exists():
        pytest.skip("not the secured Redis that ops/stack.sh runs, so the test cannot kill it")
    key = f"settlement:it-restart-{uuid.uuid4().hex}"
    client = redis.Redis.from_url(access.redis_url_for(redis_url, access.SETTLEMENT_SERVICE, password))
    try:
        for n in range(1, 201):
            with client.pipeline(transaction=True) as pipe:
                pipe.hincrby(key + ":totals", "paid", n).hset(key + ":progress", "p0", n).set(f"{key}:bet:{n}", n)
                pipe.execute()
        stack_sh("restart-redis")  # SIGKILL, then a new redis-server on the same files
        deadline = time.monotonic() + 30
        while True:
            try:
                totals = client.hgetall(key + ":totals")
                break
            except redis.exceptions.ConnectionError:
                assert time.monotonic() < deadline, "Redis did not come back"
                time.sleep(0.2)
        assert totals == {b"paid": str(sum(range(1, 201))).encode()}
        assert client.hget(key + ":progress", "p0") == b"200"
        assert [int(v) for v in client.mget([f"{key}:bet:{n}" for n in range(1, 201)])] == list(range(1, 201))
    finally:
        client.delete(key + ":totals", key + ":progress", *[f"{key}:bet:{n}" for n in range(1, 201)])
        client.close()


def test_redis_prefixes_differ_between_tests(redis_prefix: str, consumer_group: str, topic_prefix: str) -> None:
    # Three fixtures, three fresh tags: none equal, none a prefix of another.
    tags = {redis_prefix[:-1], consumer_group, topic_prefix[:-1]}
    assert len(tags) == 3
    assert all(t.startswith("it-test-redis-prefixes-differ") for t in tags)


# --- a broker killed under load ------------------------------------------------------------

N_EVENTS = 2000
TABLES = [f"T{n:02d}" for n in range(1, 13)]
PACE_S = 0.005  # a send every 5 ms: the first quarter before the kill, then sends while it is
# down until three quarters are out; the last quarter waits until it is back.


def stack_sh(*args: str) -> str:
    proc = subprocess.run(["bash", str(ROOT / "ops" / "stack.sh"), *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"ops/stack.sh {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def broker_pid() -> int:
    return int((ROOT / ".stack" / "kafka" / "kafka.pid").read_text())


def test_a_broker_killed_and_restarted_under_load_loses_no_acknowledged_event(
    kafka_broker, new_topic: Callable[..., str], consumer_group: str
) -> None:
    if not kafka_broker.ops_controlled:
        pytest.skip(
            f"the broker ({kafka_broker.source}, {kafka_broker.bootstrap}) is not the one ops/stack.sh runs, so the test cannot kill it"
        )
    bootstrap = kafka_broker.bootstrap
    topic = new_topic("restart")
    lock = threading.Lock()
    acked: dict[tuple[str, int], tuple[int, int]] = {}  # (table, seq) -> (partition, offset)
    failed: dict[tuple[str, int], Exception] = {}
    seen: dict[tuple[int, int], tuple[str, int]] = {}  # (partition, offset) -> (table, seq)
    sent = 0
    errors: list[BaseException] = []
    consumer_ready, producer_done = threading.Event(), threading.Event()
    restarted, ends_known = threading.Event(), threading.Event()
    end_offsets: dict[int, int] = {}
    retried_polls: list[float] = []

    # Generous timeouts: a record may wait out the whole restart and still be delivered.
    producer = reliable_producer(
        bootstrap, retries=1_000_000, delivery_timeout_ms=180_000, request_timeout_ms=10_000, max_block_ms=180_000, retry_backoff_ms=100
    )

    def on_ack(record: tuple[str, int], meta) -> None:
        with lock:
            acked[record] = (meta.partition, meta.offset)

    def on_error(record: tuple[str, int], exc: Exception) -> None:
        with lock:
            failed[record] = exc

    def produce() -> None:
        nonlocal sent
        try:
            for i in range(N_EVENTS):
                if i == 3 * N_EVENTS // 4:
                    restarted.wait(300)
                table, seq = TABLES[i % len(TABLES)], i // len(TABLES)
                value = json.dumps({"table": table, "seq": seq}).encode()
                future = producer.send(topic, key=table.encode(), value=value)
                future.add_callback(on_ack, (table, seq)).add_errback(on_error, (table, seq))
                sent = i + 1
                time.sleep(PACE_S)
            producer.flush(timeout=180)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(exc)
        finally:
            producer_done.set()

    def consume() -> None:
        consumer = group_consumer(bootstrap, topic, consumer_group)
        try:
            while True:
                if consumer.assignment():
                    consumer_ready.set()
                try:
                    batches = consumer.poll(timeout_ms=200)
                except RetriableError:
                    # kafka-python 3.0 lets poll() raise KafkaConnectionError while the broker
                    # is down: a real consumer loop must retry too, and so does this one.
                    retried_polls.append(time.monotonic())
                    time.sleep(0.2)
                    continue
                for batch in batches.values():
                    for r in batch:
                        event = json.loads(r.value)
                        with lock:  # re-reads after a rebalance land on the same (partition, offset)
                            seen[(r.partition, r.offset)] = (event["table"], event["seq"])
                if batches:
                    try:
                        consumer.commit()
                    except Exception:  # noqa: BLE001 - the broker may be down: commit later
                        pass
                if ends_known.is_set():
                    last: dict[int, int] = {}  # the highest offset read per partition
                    with lock:
                        for p, o in seen:
                            last[p] = max(last.get(p, -1), o)
                    if all(end == 0 or last.get(p, -1) + 1 >= end for p, end in end_offsets.items()):
                        return
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            consumer.close()

    threads = [
        threading.Thread(target=produce, name="producer", daemon=True),
        threading.Thread(target=consume, name="consumer", daemon=True),
    ]
    threads[1].start()
    assert consumer_ready.wait(30), "the consumer got no partitions within 30 s"
    threads[0].start()

    # Kill the broker (SIGKILL) a quarter of the way in, with both clients busy.
    while sent < N_EVENTS // 4 and not producer_done.is_set():
        time.sleep(0.05)
    pid_before = broker_pid()
    with lock:
        acked_before, seen_before = len(acked), len(seen)
    try:
        restart = stack_sh("restart-kafka")
    finally:
        sent_while_down = sent - N_EVENTS // 4
        restarted.set()
    assert broker_pid() != pid_before

    assert producer_done.wait(240), "the producer did not finish"
    producer.close(timeout=30)
    probe = KafkaConsumer(**kafka_client_config(bootstrap), **CLIENT)
    parts = [TopicPartition(topic, p) for p in probe.partitions_for_topic(topic)]
    end_offsets.update({tp.partition: off for tp, off in probe.end_offsets(parts).items()})
    probe.close()
    ends_known.set()
    threads[1].join(120)
    if threads[1].is_alive():
        with lock:
            last: dict[int, int] = {}
            for p, o in seen:
                last[p] = max(last.get(p, -1), o)
        pytest.fail(f"the consumer did not catch up: end offsets {end_offsets}, read up to {last}, {len(retried_polls)} polls raised")
    if errors:
        raise errors[0]

    print(
        f"\nkilled the broker after {N_EVENTS // 4} sends ({acked_before} acknowledged, "
        f"{seen_before} consumed); {sent_while_down} more sent while it restarted, the rest after; "
        f"{len(acked)} acknowledged, {len(seen)} distinct records read "
        f"({len(retried_polls)} consumer polls raised and were retried); " + restart.strip().splitlines()[-1].removeprefix("[stack] ")
    )
    # Before the kill both clients were working, and the producer went on sending meanwhile.
    assert acked_before > 0 and seen_before > 0
    assert sent_while_down > 0
    # Generous retries: every record was acknowledged in the end, none failed.
    assert not failed, f"{len(failed)} sends failed, e.g. {next(iter(failed.items()))}"
    assert len(acked) == N_EVENTS

    where: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for position, record in seen.items():
        where[record].append(position)
    duplicated = {r: ps for r, ps in where.items() if len(ps) > 1}
    missing = set(acked) - set(where)
    assert not missing, f"{len(missing)} acknowledged events lost, e.g. {sorted(missing)[:5]}"
    assert not duplicated, f"{len(duplicated)} events written twice, e.g. {list(duplicated.items())[:3]}"
    assert all(where[r] == [acked[r]] for r in acked)  # each one where its ack said it is
    # Idempotence also keeps each table's sequence in order on its partition.
    for table in TABLES:
        log = [seq for _, (t, seq) in sorted(seen.items()) if t == table]
        assert log == list(range(len(log))), f"{table}: out of order or gapped: {log[:20]}..."
