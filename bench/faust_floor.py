"""What faust-streaming itself costs per event at a table's pace: a worker whose agent does
nothing (``async for event in stream.events(): pass``) consumes one topic fed at ``--rate``
records a second (250-byte values keyed by ``--tables`` table ids, the shape of a card read);
its CPU (utime + stime from /proc) over the measured window, per event and as a share of a core.

It is the floor under the detectors' cost per round: whatever they do, each event they read goes
through this much of faust. They read about 22 events a round: at a round every 50 s a table,
1,000 tables bring them about 450 events a second (bench/pipeline.py). The worker's lag is not
checked: a share of a core near 100 % says it did not keep up, and the figure is then too low.

    eval "$(ops/stack.sh env)"      # the admin's credentials
    .venv/bin/python bench/faust_floor.py --rate 700 --seconds 120
    .venv/bin/python bench/faust_floor.py --rate 700 --gather-ms 20   # fetches gathering 20 ms (FETCH_GATHER_MS)
    .venv/bin/python bench/faust_floor.py --rate 450 --loop aio       # on asyncio's loop, not uvloop's
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from procstat import load_average, proc_cpu_seconds
from surveil.runtime.config import Settings, kafka_client_config

if TYPE_CHECKING:
    import faust  # imported by the worker only after its loop is chosen

WARM_UP_S = 20.0
PARTITIONS = 6  # the shared topics' count


def say(line: str) -> None:
    print(f"[faust-floor] {line}", file=sys.stderr, flush=True)


def floor_app(group: str, gather_ms: int, loop: str) -> faust.App:
    """A faust app built as the detectors' (their app class and transport, with their settings
    that bear on a record's cost), its fetches gathering ``gather_ms`` (their FETCH_GATHER_MS)."""
    import mode.loop

    mode.loop.use(loop)  # as the detectors' service.main does, before faust makes its loop
    from surveil.anomaly_detection.transport import App

    settings = Settings.from_env("anomaly-detection")
    app = App(
        group,
        broker=f"kafka://{settings.kafka_bootstrap}",
        broker_credentials=settings.faust_credentials(),
        store="memory://",
        topic_partitions=PARTITIONS,
        key_serializer="raw",
        value_serializer="raw",
        web_enabled=False,
        consumer_auto_offset_reset="latest",
        producer_acks=-1,
        broker_commit_interval=settings.commit_interval_ms / 1000,
        datadir=f"/tmp/{group}",
    )
    app.fetch_gather_ms = gather_ms
    return app


def run_worker(app: faust.App) -> None:
    sys.argv = [sys.argv[0], "worker", "--loglevel", "warn"]
    app.main()


def worker(topic: str, group: str, gather_ms: int, loop: str) -> None:
    """Child process: a faust worker whose agent reads ``topic`` and does nothing."""
    app = floor_app(group, gather_ms, loop)
    source = app.topic(topic, key_type=bytes, value_type=bytes)

    @app.agent(source)
    async def nothing(stream: Any) -> None:
        async for _ in stream.events():
            pass

    run_worker(app)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=700.0, help="records a second")
    parser.add_argument("--seconds", type=float, default=120.0, help="measured window (after a 20 s warm-up)")
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument(
        "--gather-ms",
        type=int,
        default=0,
        help="a fetch after one that brought records waits up to this long for more (the detectors' FETCH_GATHER_MS; default 0 here)",
    )
    parser.add_argument("--loop", choices=("uvloop", "aio"), default="uvloop", help="the worker's event loop (the detectors': uvloop)")
    parser.add_argument("--worker", nargs=2, metavar=("TOPIC", "GROUP"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker, args.gather_ms, args.loop)
        return

    settings = Settings.from_env("bench")
    run = uuid.uuid4().hex[:8]
    topic, group = f"bench-faust-{run}", f"bench-faust-{run}"
    admin = KafkaAdminClient(**settings.kafka_client())
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    log = open(f"/tmp/{group}.log", "w")
    child = subprocess.Popen(
        [sys.executable, __file__, "--gather-ms", str(args.gather_ms), "--loop", args.loop, "--worker", topic, group],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    producer = KafkaProducer(**kafka_client_config(), linger_ms=5)
    value = b"x" * 250
    keys = [f"T{n:04d}".encode() for n in range(args.tables)]
    try:
        say(f"worker {child.pid} on {topic}: {args.rate:.0f} records/s, {WARM_UP_S:.0f} s warm-up then {args.seconds:.0f} s measured")
        started, sent, cpu0, load0, measured_from = time.monotonic(), 0, None, None, 0
        while True:
            elapsed = time.monotonic() - started
            if cpu0 is None and elapsed >= WARM_UP_S:
                cpu0, load0, measured_from = proc_cpu_seconds(child.pid), load_average(), sent
            if elapsed >= WARM_UP_S + args.seconds:
                break
            due = int(elapsed * args.rate)
            while sent < due:
                producer.send(topic, key=keys[sent % len(keys)], value=value)
                sent += 1
            if child.poll() is not None:
                raise SystemExit(f"the worker exited ({child.returncode}): /tmp/{group}.log")
            time.sleep(0.002)
        cpu = proc_cpu_seconds(child.pid) - cpu0
        events = sent - measured_from
        load1 = load_average()
    finally:
        producer.close()
        child.terminate()
        child.wait(30)
        admin.delete_topics([topic])
        admin.close()
        log.close()
        shutil.rmtree(f"/tmp/{group}", ignore_errors=True)  # the worker's faust data directory
    print(
        f"faust worker on {args.loop}, agent doing nothing, {events / args.seconds:.0f} events/s (gather {args.gather_ms} ms): "
        f"{cpu / events * 1e6:.0f} us CPU an event, {100 * cpu / args.seconds:.1f} % of a core; "
        f"load average {load0[0]:.1f} - {load1[0]:.1f}"
    )


if __name__ == "__main__":
    main()
