"""Kafka throughput of small events (a card.read event is ~250 bytes) on the running local stack:
kafka-python, which the services use, next to Kafka's own Java ProducerPerformance and
ConsumerPerformance on the same broker with the same producer settings.

    ops/stack.sh up
    .venv/bin/python bench/kafka_throughput.py [--records 200000] [--java-records 1000000]

Producer settings on both sides: acks=all, idempotent, linger.ms=10, batch.size=64 KiB, no
compression. Each run writes to fresh topics (the shared partition count) and deletes them after.
MB is 2^20 bytes of record values, as the Java tools count it.
"""

from __future__ import annotations

import argparse
import atexit
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from surveil.runtime.config import kafka_client_config
from surveil.runtime.topic_admin import create_topics, delete_topics, partitions_from_env

ROOT = Path(__file__).resolve().parents[1]
LIBS = ROOT / ".stack" / "kafka" / "libs" / "*"
LINGER_MS, BATCH_BYTES = 10, 64 * 1024
TABLES = [f"T{n:02d}" for n in range(1, 13)]


def card_read_events(count: int, size: int) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs keyed by table like the real topic: baccarat.card.read CloudEvents,
    trimmed to fit (a short id, no datacontenttype: a full one with a UUID id is ~280 bytes)
    and padded with JSON whitespace to exactly ``size`` bytes, as the Java tool's records are."""
    events = []
    for i in range(count):
        table = TABLES[i % len(TABLES)]
        event = {
            "specversion": "1.0",
            "id": f"{i:08x}",
            "source": f"shoe-reader/{table}",
            "type": "baccarat.card.read",
            "time": "2026-11-29T11:00:00Z",
            "subject": table,
            "data": {"table_id": table, "shoe_id": "S1", "index": i % 416 + 1, "card": "10H", "face_up": False},
        }
        value = json.dumps(event, separators=(",", ":")).encode()
        if len(value) > size:
            raise SystemExit(f"an event is {len(value)} bytes, more than --size {size}")
        events.append((table.encode(), value + b" " * (size - len(value))))
    return events


def rate(records: int, size: int, seconds: float) -> tuple[float, float]:
    return records / seconds, records * size / 2**20 / seconds


def python_produce(bootstrap: str, topic: str, events: list[tuple[bytes, bytes]]) -> float:
    producer = KafkaProducer(
        **kafka_client_config(bootstrap), acks="all", enable_idempotence=True, linger_ms=LINGER_MS, batch_size=BATCH_BYTES
    )
    producer.partitions_for(topic)  # metadata first: not part of the measured time
    start = time.perf_counter()
    for key, value in events:
        producer.send(topic, key=key, value=value)
    producer.flush()
    seconds = time.perf_counter() - start
    producer.close()
    return seconds


def python_consume(bootstrap: str, topic: str, expected: int) -> float:
    consumer = KafkaConsumer(**kafka_client_config(bootstrap), enable_auto_commit=False, max_poll_records=5000)
    parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
    consumer.assign(parts)
    consumer.seek_to_beginning(*parts)
    got = 0
    start = time.perf_counter()
    while got < expected:
        got += sum(len(batch) for batch in consumer.poll(timeout_ms=1000).values())
    seconds = time.perf_counter() - start
    consumer.close()
    return seconds


def java_client_config(bootstrap: str) -> str:
    """A properties file with the Java clients' equivalent of the credentials in the environment
    (KAFKA_USERNAME, ...: surveil.runtime.config), for the tools' --producer.config / --consumer.config."""
    config = kafka_client_config(bootstrap)
    lines = [f"bootstrap.servers={bootstrap}", f"security.protocol={config['security_protocol']}"]
    if config["security_protocol"].startswith("SASL_"):
        module = "plain.PlainLoginModule" if config["sasl_mechanism"] == "PLAIN" else "scram.ScramLoginModule"
        lines += [
            f"sasl.mechanism={config['sasl_mechanism']}",
            f"sasl.jaas.config=org.apache.kafka.common.security.{module} required "
            f'username="{config["sasl_plain_username"]}" password="{config["sasl_plain_password"]}";',
        ]
    if config["security_protocol"].endswith("SSL") and config.get("ssl_cafile"):
        lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={config['ssl_cafile']}"]
    with tempfile.NamedTemporaryFile("w", prefix="bench-kafka-", suffix=".properties", delete=False) as file:
        file.write("\n".join(lines) + "\n")
    os.chmod(file.name, 0o600)
    atexit.register(os.unlink, file.name)  # it holds a password
    return file.name


def java_tool(cls: str, *args: str) -> str:
    cmd = ["java", "-Xmx512m", "-cp", str(LIBS), f"org.apache.kafka.tools.{cls}", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{cls} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def java_produce(bootstrap: str, topic: str, records: int, size: int) -> tuple[float, float]:
    out = java_tool(
        "ProducerPerformance",
        "--topic",
        topic,
        "--num-records",
        str(records),
        "--record-size",
        str(size),
        "--throughput",
        "-1",
        "--producer.config",
        java_client_config(bootstrap),
        "--producer-props",
        f"bootstrap.servers={bootstrap}",
        "acks=all",
        "enable.idempotence=true",
        f"linger.ms={LINGER_MS}",
        f"batch.size={BATCH_BYTES}",
    )
    # last line: "1000000 records sent, 345125.9 records/sec (82.28 MB/sec), 3.1 ms avg latency, ..."
    m = re.search(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)", out.strip().splitlines()[-1])
    if not m:
        raise SystemExit(f"cannot read ProducerPerformance's output:\n{out}")
    return float(m[2]), float(m[3])


def java_consume(bootstrap: str, topic: str, records: int) -> tuple[float, float]:
    out = java_tool(
        "ConsumerPerformance",
        "--bootstrap-server",
        bootstrap,
        "--consumer.config",
        java_client_config(bootstrap),
        "--topic",
        topic,
        "--messages",
        str(records),
        "--timeout",
        "60000",
    )
    # header: start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, ...
    lines = [line for line in out.splitlines() if line.strip()]
    header = [h.strip() for h in lines[-2].split(",")]
    values = [v.strip() for v in lines[-1].split(",")]
    row = dict(zip(header, values))
    return float(row["nMsg.sec"]), float(row["MB.sec"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--records", type=int, default=200_000, help="kafka-python records")
    parser.add_argument("--java-records", type=int, default=1_000_000, help="Java tool records")
    parser.add_argument("--size", type=int, default=250, help="bytes per record value")
    parser.add_argument("--partitions", type=int, default=partitions_from_env())
    parser.add_argument("--skip-java", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)

    run = uuid.uuid4().hex[:8]
    py_topic, java_topic = f"bench-{run}-python", f"bench-{run}-java"
    create_topics(args.bootstrap, [py_topic, java_topic], args.partitions)
    rows = []
    try:
        print(f"building {args.records:,} card.read events of {args.size} bytes ...", flush=True)
        events = card_read_events(args.records, args.size)
        print("kafka-python: producing ...", flush=True)
        seconds = python_produce(args.bootstrap, py_topic, events)
        rows.append(("kafka-python produce", args.records, *rate(args.records, args.size, seconds)))
        print("kafka-python: consuming ...", flush=True)
        seconds = python_consume(args.bootstrap, py_topic, args.records)
        rows.append(("kafka-python consume", args.records, *rate(args.records, args.size, seconds)))
        if not args.skip_java:
            print("ProducerPerformance (Java) ...", flush=True)
            rows.append(
                ("ProducerPerformance (Java)", args.java_records, *java_produce(args.bootstrap, java_topic, args.java_records, args.size))
            )
            print("ConsumerPerformance (Java) ...", flush=True)
            rows.append(("ConsumerPerformance (Java)", args.java_records, *java_consume(args.bootstrap, java_topic, args.java_records)))
    finally:
        delete_topics(args.bootstrap, [py_topic, java_topic])

    print(
        f"\n{args.size}-byte records, {args.partitions} partitions, acks=all, idempotent, "
        f"linger.ms={LINGER_MS}, batch.size={BATCH_BYTES}; broker {args.bootstrap}"
    )
    print(f"{'':28} {'records':>10} {'records/s':>12} {'MB/s':>8}")
    for name, records, per_s, mb_s in rows:
        print(f"{name:28} {records:>10,} {per_s:>12,.0f} {mb_s:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
