"""The floor under the whole pipeline: its Kafka clients and the broker alone, at a floor's pace.

The live pipeline's topics, clients and record rates (``bench/pipeline.py live``) with none of the
services' work: no decoding, no signatures, no rules, no Redis, no state, no metrics. At
``--tables`` tables playing a round every ``--pace`` s:

- shoe: a ``Publisher``'s producer (kafka-python, lingering ``KAFKA_LINGER_MS``: the shoe-reader's
  client) sends the shoes' card reads, ``--shoe`` records a round;
- inputs: the simulated floor's consoles (librdkafka, ``floor_producer.DeviceProducer``) send
  ``--inputs`` records a round;
- table: a kafka-python transactional relay (``kafka_floor.py``'s: the table-controller's clients
  and loop, its batches gathering ``KAFKA_GATHER_MS`` at the broker while records keep coming) reads
  shoe and inputs and writes ``--table-out`` records per record read;
- settlement: the same relay reads table and writes ``--settlement-out`` per record read;
- detectors: a faust worker (the detectors' app class and transport, fetches gathering
  ``FETCH_GATHER_MS``) whose agent reads shoe, table and settlement and forwards ``--facts`` of
  them to a facts topic, which a second agent reads; neither does anything else.

``--relay-client librdkafka``: the relays on librdkafka (confluent-kafka) instead, the same
settings and loop (``kafka_floor.relay_librdkafka``), to compare with the services' client.

The defaults are the live pipeline's records a round, at any floor size (1,000 tables in
``bench/results/run-2026-12-06-1000-4min-topics.json``): the card reads, the consoles' records
and the facts as the broker counted them, the table and settlement records as the detectors read
them (the broker's count of those includes the transactions' markers). Every value begins with
the time its device sent it, and the relays copy values whole: the worker takes each record's
age as its agent gets it, for a card read (no hop before it), a table record (one transactional
hop) and a settlement record (two).

After ``--warm-up`` s, over ``--seconds``: each process' CPU (utime + stime from /proc) a round,
the broker's included, and in all; the ages' p50 and p99 by topic, of the records sent in the
window; and each group's lag at the end (the relays' and the worker's): a lag past a batch or two
says that hop did not keep up, and the figures are then too low.

    eval "$(ops/stack.sh env)"      # the admin's credentials
    .venv/bin/python bench/clients_floor.py --tables 3000
    .venv/bin/python bench/clients_floor.py --tables 1000 --seconds 120 --json clients-floor.jsonl
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from array import array
from pathlib import Path
from typing import IO, Any

from kafka.admin import KafkaAdminClient, NewTopic

from faust_floor import floor_app, run_worker
from kafka_floor import PARTITIONS, SENT_AT, _child, _counts, _lag, _line, broker_pid, relay_child
from procstat import load_average, proc_cpu_seconds
from surveil.runtime.config import Settings

ROLES = ("shoe", "inputs", "table", "settlement")  # the topics fed and relayed, in the pipeline's order
WATCHED = ("shoe", "table", "settlement")  # the topics the detectors read, with the hops before each


def say(line: str) -> None:
    print(f"[clients-floor] {line}", file=sys.stderr, flush=True)


def worker(names: dict[str, str], group: str, facts_ratio: float, ages_file: str) -> None:
    """Child process: a faust worker reading the watched topics, forwarding ``facts_ratio`` of
    their records to the facts topic, keeping each record's (sent at, age); on the parent's ask
    (``ages_file`` + ".ask" made), it writes them to ``ages_file``."""
    settings = Settings.from_env("anomaly-detection")
    app = floor_app(group, settings.fetch_gather_ms, "uvloop")  # the detectors' FETCH_GATHER_MS and loop
    source = app.topic(*(names[role] for role in WATCHED), key_type=bytes, value_type=bytes)
    facts = app.topic(names["facts"], key_type=bytes, value_type=bytes)
    role_of = {names[role]: role for role in WATCHED}
    ages = {role: array("d") for role in WATCHED}  # sent at, age; sent at, age; ...

    @app.agent(source)
    async def watch(stream: Any) -> None:
        due = 0.0
        async for event in stream.events():
            now = time.time()
            sent = SENT_AT.unpack_from(event.value)[0]
            kept = ages[role_of[event.message.topic]]
            kept.append(sent)
            kept.append(now - sent)
            due += facts_ratio
            if due >= 1:
                due -= 1
                await facts.send(key=event.key, value=event.value)

    @app.agent(facts)
    async def chart(stream: Any) -> None:
        async for _ in stream.events():
            pass

    @app.timer(1.0)  # type: ignore[untyped-decorator]
    async def answer() -> None:
        if os.path.exists(ages_file + ".ask"):
            with open(ages_file + ".tmp", "w") as out:
                json.dump({role: kept.tolist() for role, kept in ages.items()}, out)
            os.replace(ages_file + ".tmp", ages_file)
            os.unlink(ages_file + ".ask")

    run_worker(app)


def _ages(ages_file: Path, worker_process: subprocess.Popen[bytes], timeout: float = 30) -> dict[str, list[float]]:
    ages_file.unlink(missing_ok=True)
    Path(f"{ages_file}.ask").touch()
    deadline = time.monotonic() + timeout
    while not ages_file.exists():
        if worker_process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the worker did not write its ages ({ages_file})")
        time.sleep(0.2)
    return dict(json.loads(ages_file.read_text()))


def ages_summary(kept: list[float], sent_from: float, sent_to: float) -> dict[str, Any]:
    """The ages (``kept``: sent at, age; sent at, age; ...) of the records sent in the window: p50,
    p99 and the share within 100 ms, in ms; and the p50 in each half of the window, which a
    backlog building up would set apart."""
    middle = (sent_from + sent_to) / 2
    halves: tuple[list[float], list[float]] = ([], [])
    for sent, age in zip(kept[::2], kept[1::2]):
        if sent_from <= sent < sent_to:
            halves[sent >= middle].append(age)
    ages = sorted(halves[0] + halves[1])
    if not ages:
        return {"records": 0}
    return {
        "records": len(ages),
        "p50_ms": round(1000 * percentile(ages, 0.50), 1),
        "p99_ms": round(1000 * percentile(ages, 0.99), 1),
        "within_100ms": round(bisect.bisect_right(ages, 0.1) / len(ages), 4),
        "p50_ms_halves": [round(1000 * percentile(sorted(half), 0.50), 1) if half else None for half in halves],
    }


def percentile(ordered: list[float], share: float) -> float:
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=3000)
    parser.add_argument("--pace", type=float, default=50.0, help="seconds a round at each table (real pace)")
    parser.add_argument("--seconds", type=float, default=120.0, help="measured window (after the warm-up)")
    parser.add_argument("--warm-up", type=float, default=30.0, help="seconds fed before the window")
    parser.add_argument("--shoe", type=float, default=5.30, help="card reads a round")
    parser.add_argument("--inputs", type=float, default=13.37, help="consoles' records a round")
    parser.add_argument("--table-out", type=float, default=0.42, help="table records per shoe or input record read")
    parser.add_argument("--settlement-out", type=float, default=0.62, help="settlement records per table record read")
    parser.add_argument("--facts", type=float, default=0.22, help="facts per record the detectors read")
    parser.add_argument(
        "--relay-client",
        choices=("kafka-python", "librdkafka"),
        default="kafka-python",
        help="the relays' client (the services': kafka-python; librdkafka to compare)",
    )
    parser.add_argument("--json", type=Path, help="append the result here as one JSON line")
    parser.add_argument("--worker", nargs=3, metavar=("NAMES", "GROUP", "AGES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        names, group, ages_file = args.worker
        worker(json.loads(names), group, args.facts, ages_file)
        return

    settings = Settings.from_env("bench")
    broker = broker_pid(settings)
    if broker is None:
        raise SystemExit(f"the broker's process is not found (listening on {settings.kafka_bootstrap}, or in .stack/)")
    rounds_per_s = args.tables / args.pace
    run = uuid.uuid4().hex[:8]
    prefix = f"bench-clients-{run}"
    names = {role: f"{prefix}-{role}" for role in (*ROLES, "facts")}
    groups = {"table": f"{prefix}-table-controller", "settlement": f"{prefix}-settlement", "detectors": f"{prefix}-detectors"}
    admin = KafkaAdminClient(**settings.kafka_client())
    admin.create_topics([NewTopic(name, PARTITIONS, 1) for name in names.values()])
    log: IO[str] = open(f"/tmp/{prefix}.log", "w")
    ages_file = Path(f"/tmp/{prefix}-ages.json")
    children: dict[str, subprocess.Popen[bytes]] = {}
    say(
        f"{args.tables} tables, a round every {args.pace:g} s ({rounds_per_s:.1f} rounds/s); {args.relay_client} relays gathering "
        f"{settings.kafka_gather_ms} ms, the worker's fetches {settings.fetch_gather_ms} ms; log /tmp/{prefix}.log"
    )
    try:
        relays = {
            "table": (f"{names['shoe']},{names['inputs']}", names["table"], args.table_out),
            "settlement": (names["table"], names["settlement"], args.settlement_out),
        }
        for role, (source, sink, ratio) in relays.items():
            children[role] = relay_child(source, sink, groups[role], ratio, settings.kafka_gather_ms, args.relay_client, log)
        children["detectors"] = subprocess.Popen(
            [sys.executable, __file__, "--facts", str(args.facts), "--worker", json.dumps(names), groups["detectors"], str(ages_file)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        for role in relays:
            _line(children[role], 120, f"the {role} relay's readiness")
        time.sleep(15)  # the worker joins its group (no line to wait for: faust's own output)
        feeds = {"shoe": ("kafka-python", args.shoe), "inputs": ("librdkafka", args.inputs)}
        for role, (client, per_round) in feeds.items():
            rate = per_round * rounds_per_s
            children[role] = _child(["--rate", str(rate), "--tables", str(args.tables), "--feeder", client, "--feed", names[role]], log)
            _line(children[role], 60, f"the {role} feeder's readiness")
        say(f"fed; warming up {args.warm_up:.0f} s, then measuring {args.seconds:.0f} s")
        time.sleep(args.warm_up)
        pids = {name: child.pid for name, child in children.items()} | {"broker": broker}
        cpu0, load0, t0, sent_from = (
            {name: proc_cpu_seconds(pid) for name, pid in pids.items()},
            load_average(),
            time.monotonic(),
            time.time(),
        )
        relayed0 = {role: _counts(children[role]) for role in relays}
        say(f"measuring until {time.strftime('%H:%M:%S', time.localtime(sent_from + args.seconds))}")
        time.sleep(args.seconds)
        cpu1, t1, sent_to = {name: proc_cpu_seconds(pid) for name, pid in pids.items()}, time.monotonic(), time.time()
        relayed1 = {role: _counts(children[role]) for role in relays}
        load1 = load_average()
        time.sleep(5)  # the records sent last reach the worker
        ages = _ages(ages_file, children["detectors"])
        lags = {
            "table": _lag(settings, admin, names["shoe"], groups["table"]) + _lag(settings, admin, names["inputs"], groups["table"]),
            "settlement": _lag(settings, admin, names["table"], groups["settlement"]),
            "detectors": sum(_lag(settings, admin, names[role], groups["detectors"]) for role in WATCHED),
        }
        for name, child in children.items():
            if child.poll() is not None:
                raise SystemExit(f"the {name} process exited ({child.returncode}) during the run: /tmp/{prefix}.log")
    finally:
        for child in reversed(children.values()):  # the feeders first
            child.terminate()
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
        admin.delete_topics(list(names.values()))
        admin.close()
        log.close()
        shutil.rmtree(f"/tmp/{groups['detectors']}", ignore_errors=True)  # the worker's faust data directory
        for leftover in (ages_file, Path(f"{ages_file}.ask")):
            leftover.unlink(missing_ok=True)

    window = t1 - t0
    rounds = rounds_per_s * window
    ms_per_round = {name: 1000 * (cpu1[name] - cpu0[name]) / rounds for name in pids}
    ms_per_round["total"] = sum(ms_per_round.values())
    latency = {role: ages_summary(ages.get(role, []), sent_from, sent_to) for role in WATCHED}
    relayed = {role: [b - a for a, b in zip(relayed0[role], relayed1[role])] for role in relays}
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime(sent_from)),  # the window's start, UTC
        "tables": args.tables,
        "rounds_per_s": round(rounds_per_s, 2),
        "window_s": round(window, 1),
        "relay_client": args.relay_client,
        "kafka_gather_ms": settings.kafka_gather_ms,
        "fetch_gather_ms": settings.fetch_gather_ms,
        "per_round": {
            "shoe": args.shoe,
            "inputs": args.inputs,
            "table_out": args.table_out,
            "settlement_out": args.settlement_out,
            "facts": args.facts,
        },
        "cpu_ms_per_round": {name: round(ms, 2) for name, ms in ms_per_round.items()},
        "cores": round(ms_per_round["total"] * rounds_per_s / 1000, 2),
        "age_at_detectors": latency,
        "relayed": {role: dict(zip(("read", "written", "transactions"), counts)) for role, counts in relayed.items()},
        "lag_at_end": lags,
        "load_average": [load0[0], load1[0]],
    }
    print(f"the pipeline's clients alone, {args.tables} tables ({rounds_per_s:.1f} rounds/s) over {window:.0f} s:")
    print("  CPU ms a round: " + ", ".join(f"{name} {ms:.2f}" for name, ms in ms_per_round.items()) + f" ({result['cores']} cores)")
    for role, counts in relayed.items():
        read, written, transactions = counts
        print(
            f"  {role} relay: {read / window:.0f} records/s read, {written / window:.0f} written, {read / max(transactions, 1):.1f} read a transaction"
        )
    hops = {"shoe": "no hop", "table": "one transactional hop", "settlement": "two"}
    for role, figures in latency.items():
        if figures["records"]:
            first, second = figures["p50_ms_halves"]
            print(
                f"  age at the detectors, {role} ({hops[role]}): p50 {figures['p50_ms']} ms (halves {first}, {second}), "
                f"p99 {figures['p99_ms']} ms, {100 * figures['within_100ms']:.1f} % within 100 ms, over {figures['records']} records"
            )
    print("  lag at the end: " + ", ".join(f"{group} {lag}" for group, lag in lags.items()))
    print(f"  load average {load0[0]:.1f} - {load1[0]:.1f}")
    if args.json:
        with args.json.open("a") as out:
            out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
