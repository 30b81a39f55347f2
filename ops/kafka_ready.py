"""Wait until a Kafka broker really serves: produce one record to a scratch topic and read it back.

An open port is not enough (the broker listens before its controller has elected itself and
loaded the metadata), so ops/stack.sh asks for a full client round trip, retried until it
works or --timeout passes. With --pid, gives up at once when that process dies. It logs in with
the credentials in the environment (KAFKA_USERNAME, ...: the admin's, from .stack/secrets).

    python ops/kafka_ready.py --bootstrap 127.0.0.1:9092 --timeout 90 --pid 1234
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from surveil.runtime.config import kafka_client_config

SCRATCH_TOPIC = "_stack.readiness"


# kafka-python backs off up to 30 s between reconnects by default, so a client made while the
# broker is still starting could sleep long after it is up: retry fast and give up fast.
FAST = {"reconnect_backoff_ms": 50, "reconnect_backoff_max_ms": 500, "request_timeout_ms": 5000}


def round_trip(bootstrap: str) -> None:
    """One produce + consume of a fresh token; raises on any failure."""
    client = {**kafka_client_config(bootstrap), **FAST}
    admin = KafkaAdminClient(**client)
    try:
        admin.create_topics([NewTopic(SCRATCH_TOPIC, 1, 1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()

    token = uuid.uuid4().hex.encode()
    producer = KafkaProducer(**client, acks="all", max_block_ms=5000)
    try:
        meta = producer.send(SCRATCH_TOPIC, token).get(timeout=10)
    finally:
        producer.close(timeout=5)

    consumer = KafkaConsumer(**{**client, "request_timeout_ms": 11000}, enable_auto_commit=False, consumer_timeout_ms=10000)
    try:
        tp = TopicPartition(SCRATCH_TOPIC, meta.partition)
        consumer.assign([tp])
        consumer.seek(tp, meta.offset)
        for record in consumer:
            if record.value == token:
                return
        raise RuntimeError("the record produced was not read back within 10 s")
    finally:
        consumer.close()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (our child that already died) still answers kill 0.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument("--pid", type=int, help="the broker's pid: stop waiting if it dies")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # kafka-python logs every refused connection while we wait

    start = time.monotonic()
    last_error: Exception | None = None
    while time.monotonic() - start < args.timeout:
        if args.pid and not alive(args.pid):
            print(f"the broker process {args.pid} exited", file=sys.stderr)
            return 1
        try:
            round_trip(args.bootstrap)
            print(f"produce/consume round trip OK after {time.monotonic() - start:.1f} s")
            return 0
        except Exception as exc:  # noqa: BLE001 - anything means "not yet"
            last_error = exc
            time.sleep(0.5)
    print(f"no produce/consume round trip with {args.bootstrap} within {args.timeout:.0f} s; last error: {last_error!r}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
