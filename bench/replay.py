"""Replaying a recorded event log: offline (``surveil replay LOG``), through Kafka into the
running services (``surveil replay LOG --kafka ... --max``), and the floor under both: how fast
the same file's JSON lines merely decode.

The log is a simulated floor recorded offline (``surveil simulate``'s path: the devices through
the real table side), with irregularities injected at every table so the detectors have alerts to
raise; it is made once and kept (``--log``).

- decode: every line of the file read, then decoded by ``json.loads``, ``orjson.loads``,
  ``msgspec.json.decode`` (untyped), and ``surveil.events.codec.decode`` (typed and validated,
  what the replay does), each event dropped as the next is decoded, as a replay does; events/s,
  best of ``--repeat``. The *decode floor* is ``codec.decode``'s: nothing that reads the log goes
  faster. One more row decodes into a list that keeps every event: on the 100 x 2 log that takes
  three times as long, mostly the garbage collector walking the events kept. A replay keeps none,
  so that is not its floor.
- offline: ``surveil.analysis.replay.replay`` on the file's lines, in this process and
  with each of ``--workers`` worker processes (events/s and rounds/s, every one of ``--repeat``
  runs), and the ``surveil replay LOG`` command timed from start to exit (report included). Each
  replay follows a pass of the decode floor, and its share of the floor is the floor pass's time
  over the replay's (the replay's events/s as a fraction of the floor's): this machine's speed
  wanders by a third between minutes, so a floor timed minutes earlier is not the one to divide by.
- skeleton: the same one-process replay with every handler of the table watch doing nothing, paired
  with the floor the same way: what reading the log, dealing each event to its table's watch and
  the window of seen event ids cost before any rule is checked.
- least: the least any Python replay does with a line, paired with the floor the same way: decode
  it, find its table, keep its id in the table's window of recent ids (a duplicate skipped), and
  call one function that does one lookup. Its share of the floor is the most a replay that keeps
  state and checks rules in Python could reach.
- by type: the log's events decoded once (and set aside from the garbage collector), then fed to
  the detectors (``FloorWatch.feed``: the table watch, its window of seen ids, the patron and
  dealer charts, the alerts) one at a time, each feed timed and summed by event type: µs an event
  of each type and its share of the detectors' time (best of ``--repeat`` passes).
- kafka: a deployment of its own (bench/pipeline.py's ``Pipeline``: the four services, topics
  under a fresh prefix); ``surveil replay LOG --kafka BOOTSTRAP --max`` as the operator; the clock
  runs from its start until every alert the offline replay raises has arrived on
  ``baccarat.alerts`` and the detectors have consumed every event. The alerts are compared with
  the offline replay's by id.

    eval "$(ops/stack.sh env)"
    .venv/bin/python bench/replay.py --tables 100 --shoes 2          # makes the log, then all of it
    .venv/bin/python bench/replay.py --log /tmp/floor.jsonl --skip-kafka
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from unittest import mock

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pipeline import Alerts, Offsets, Pipeline, load_average, proc_cpu_seconds, stop_watching
from surveil.analysis.replay import replay
from surveil.cli.replay import DEFAULT_WORKERS
from surveil.detect import watch
from surveil.detect.floor import FloorWatch
from surveil.embedded.record import record_to_files
from surveil.events import codec
from surveil.sim.floor import Floor
from surveil.sim.injections import SCOPES, Scope

ROOT = Path(__file__).resolve().parents[1]
SURVEIL = ROOT / ".venv" / "bin" / "surveil"
# Every round-scope and settlement-scope code: what a replay finds at the tables.
REPLAY_INJECTIONS = tuple(
    code for code, scope in SCOPES.items() if scope in (Scope.ROUND, Scope.SETTLEMENT) and not code.name.startswith("TIE_BET")
)


def make_log(path: Path, tables: int, shoes: int, seed: int, per_table: int) -> None:
    inject = [REPLAY_INJECTIONS[i % len(REPLAY_INJECTIONS)] for i in range(tables * per_table)]
    started = time.perf_counter()
    recording = record_to_files(Floor(tables, shoes, seed, inject=inject), path, lambda event: None)
    print(
        f"log: {path}, {sum(recording.events.values()):,} events, {recording.labels} labels, made in {time.perf_counter() - started:.0f} s",
        flush=True,
    )


def lines_of(path: Path) -> list[bytes]:
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rb") as file:
        return file.readlines()


def timed(work: Any, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        out.append(time.perf_counter() - started)
    return out


def each(decode: Any, lines: list[bytes]) -> None:
    for line in lines:
        decode(line)


def after_floor(lines: list[bytes], work: Any) -> tuple[Any, float, float, float]:
    """``work()`` timed right after a pass of the decode floor: what it returned, its wall and CPU
    seconds, and the floor pass's seconds."""
    (floor,) = timed(lambda: each(codec.decode, lines), 1)
    started, cpu = time.perf_counter(), time.process_time()
    value = work()
    return value, time.perf_counter() - started, time.process_time() - cpu, floor


def shares(events: int, runs: list[tuple[float, float]]) -> dict[str, Any]:
    """Figures of (wall seconds, floor seconds) pairs: the runs' speed and their share of the floor."""
    return {
        "seconds": [w for w, _ in runs],
        "events_per_s": [events / w for w, _ in runs],
        "decode_floor_seconds": [f for _, f in runs],  # the pass just before each run
        "of_decode_floor": [f / w for w, f in runs],
    }


def decode_floor(lines: list[bytes], repeat: int) -> dict[str, Any]:
    import orjson  # the bench extra's, here only: the tests import this module without it

    untyped = msgspec.json.Decoder()
    ways = {
        "json.loads": lambda: each(json.loads, lines),
        "orjson.loads": lambda: each(orjson.loads, lines),
        "msgspec.json.decode (untyped)": lambda: each(untyped.decode, lines),
        "codec.decode (typed, validated)": lambda: each(codec.decode, lines),
        "codec.decode, every event kept in a list": lambda: [codec.decode(line) for line in lines],
    }
    out = {}
    for name, work in ways.items():
        seconds = timed(work, repeat)
        out[name] = {"seconds": seconds, "events_per_s": [len(lines) / s for s in seconds]}
    return out


T = TypeVar("T")


def paired(lines: list[bytes], repeat: int, work: Callable[[], T], events_of: Callable[[T], int]) -> dict[str, Any]:
    """``work()`` ``repeat`` times, each right after a pass of the floor; its events counted by
    ``events_of`` from what it returned."""
    runs, events = [], 0
    for _ in range(repeat):
        value, wall, _, floor = after_floor(lines, work)
        runs.append((wall, floor))
        events = events_of(value)
    return shares(events, runs)


def skeleton(lines: list[bytes], repeat: int) -> dict[str, Any]:
    with mock.patch.dict(watch._HANDLERS, dict.fromkeys(watch._HANDLERS, lambda table_watch, event: None)):
        return paired(lines, repeat, lambda: replay(iter(lines)), lambda result: result.events)


class _LeastTable:
    """A table as the least a replay keeps of it: its last ``RECENT_IDS`` event ids, and a place
    for its rounds."""

    __slots__ = ("ids", "oldest_first", "rounds")

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.oldest_first: deque[str] = deque()
        self.rounds: dict[str, Any] = {}


def _least_check(table: _LeastTable, event: Any) -> None:
    table.rounds.get(event.id)  # one lookup: less than any rule does


def least_replay(lines: list[bytes]) -> int:
    """The least any Python replay does with a line: decode it (the floor), find its table, keep
    its id in the table's window of recent ids (and skip it if already there), and call one
    function for it that does one lookup. What that costs beyond the floor is spent before any
    state is kept or any rule checked. The events fed."""
    decode, tables, checks, fed = codec.decode, dict[str, _LeastTable](), dict.fromkeys(codec.EVENT_TYPES.values(), _least_check), 0
    for line in lines:
        try:
            event = decode(line)
        except codec.InvalidEventError:
            continue
        table = tables.get(event.subject)
        if table is None:
            table = tables[event.subject] = _LeastTable()
        if event.id in table.ids:
            continue
        table.ids.add(event.id)
        table.oldest_first.append(event.id)
        if len(table.oldest_first) > watch.RECENT_IDS:
            table.ids.discard(table.oldest_first.popleft())
        checks[type(event)](table, event)
        fed += 1
    return fed


def least(lines: list[bytes], repeat: int) -> dict[str, Any]:
    return paired(lines, repeat, lambda: least_replay(lines), lambda fed: fed)


def by_type(lines: list[bytes], repeat: int) -> dict[str, Any]:
    events = [codec.decode(line) for line in lines]
    gc.freeze()  # the events kept are not the detectors' garbage: the collector leaves them be
    best: dict[str, float] = {}
    for _ in range(repeat):
        detectors, spent = FloorWatch(), Counter[str]()
        for event in events:
            started = time.perf_counter()
            detectors.feed(event)
            spent[event.event_type] += time.perf_counter() - started
        if not best or sum(spent.values()) < sum(best.values()):
            best = dict(spent)
    counts = Counter(event.event_type for event in events)
    del events
    gc.unfreeze()
    total = sum(best.values())
    return {
        name: {"events": counts[name], "us_each": seconds * 1e6 / counts[name], "share": seconds / total} for name, seconds in best.items()
    }


def offline(path: Path, lines: list[bytes], repeat: int, workers: list[int]) -> dict[str, Any]:
    by_workers, result = {}, None
    for count in workers:
        runs, cpu = [], []
        for _ in range(repeat):
            result, wall, used, floor = after_floor(lines, lambda workers=count: replay(iter(lines), workers=workers))
            runs.append((wall, floor))
            cpu.append(used)
        by_workers[count] = {**shares(result.events, runs), "cpu_seconds_this_process": cpu}
    assert result is not None
    rounds = result.events_by_type["baccarat.round.completed"] + result.events_by_type["baccarat.round.voided"]
    for figures in by_workers.values():
        figures["rounds_per_s"] = [rounds / w for w in figures["seconds"]]
    cli = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([str(SURVEIL), "replay", str(path), "--alerts", os.devnull], check=True, capture_output=True)
        cli.append(time.perf_counter() - started)
    return {
        "events": result.events,
        "rounds": rounds,
        "alerts": len(result.alerts),
        "tables": result.tables,
        "by_workers": by_workers,
        "cli_workers": DEFAULT_WORKERS,
        "cli_seconds": cli,
        "cli_rounds_per_s": [rounds / s for s in cli],
        "alert_ids": sorted({a.data.alert_id for a in result.alerts}),
    }


def through_kafka(
    path: Path, bootstrap: str, redis_url: str, expected_alerts: set[str], rounds: int, events: int, instances: int
) -> dict[str, Any]:
    with Pipeline(bootstrap, redis_url, instances=instances) as pipeline:
        alerts = Alerts(pipeline)
        alerts.start()
        alerts.ready.wait(60)
        offsets = Offsets(pipeline, interval=2.0)
        offsets.start()
        cpu_before, load_before = pipeline.cpu_seconds(), load_average()
        env = {**os.environ, "TOPIC_PREFIX": pipeline.prefix}  # the operator (admin), publishing into this deployment
        started = time.time()
        publisher = subprocess.Popen(
            [str(SURVEIL), "replay", str(path), "--kafka", bootstrap, "--max"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        publisher_cpu = 0.0
        while publisher.poll() is None:
            publisher_cpu = proc_cpu_seconds(publisher.pid)
            time.sleep(0.2)
        published = time.time()
        output = publisher.stdout.read().decode() if publisher.stdout else ""
        if publisher.returncode != 0:
            raise RuntimeError(f"surveil replay --kafka failed:\n{output}")
        deadline = time.time() + 3600
        done_at = None
        while time.time() < deadline:
            pipeline.check_alive()
            got = set(alerts.distinct())
            if expected_alerts <= got:
                done_at = max(arrived for arrived, alert in alerts.arrivals if alert.data.alert_id in expected_alerts)
                break
            time.sleep(0.5)
        # The detectors also consumed everything (some events raise nothing).
        while time.time() < deadline:
            s = offsets.samples[-1] if offsets.samples else None
            if s and s["t"] > (done_at or 0) and s["lag"].get("anomaly-detection", 1 << 30) <= 4 * 4 * pipeline.partitions:
                break
            time.sleep(1)
        consumed_at = offsets.samples[-1]["t"]
        time.sleep(3)
        cpu_after, load_after = pipeline.cpu_seconds(), load_average()
        stop_watching(offsets, alerts)
        peak = pipeline.peak_rss_mb()
        received = Counter(a.data.alert_id for _, a in alerts.arrivals)
    seconds = (done_at or consumed_at) - started
    return {
        "instances": instances,
        "publish_seconds": published - started,
        "publisher_cpu_seconds": publisher_cpu,
        "publish_events_per_s": events / (published - started),
        "alerts_out_seconds": seconds,
        "rounds_per_s": rounds / seconds,
        "events_per_s": events / seconds,
        "detectors_done_seconds": consumed_at - started,
        "alerts_expected": len(expected_alerts),
        "alerts_live_distinct": len(received),
        "alerts_missing": len(expected_alerts - set(received)),
        "alerts_extra": len(set(received) - expected_alerts),
        "cpu_seconds": {name: cpu_after[name] - cpu_before.get(name, 0.0) for name in cpu_after},
        "peak_rss_mb": peak,
        "load_average": {"start": load_before, "end": load_after},
    }


def of_floor(figures: dict[str, Any]) -> str:
    shares = sorted(figures["of_decode_floor"])
    return f"of the decode floor timed just before each run: median {statistics.median(shares):.2f} ({shares[0]:.2f} - {shares[-1]:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--log", type=Path, help="the log to replay (made if missing)")
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--shoes", type=int, default=2)
    parser.add_argument("--injections", type=int, default=6, help="irregularities per table and shoe")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", default=f"1,{DEFAULT_WORKERS}", help="offline: the worker counts to time, comma-separated")
    parser.add_argument("--instances", type=int, default=1, help="instances of each consumer service (kafka)")
    parser.add_argument("--skip-kafka", action="store_true")
    parser.add_argument("--skip-offline", action="store_true", help="with --kafka only: still replays once offline for the expected alerts")
    parser.add_argument("--json", type=Path, help="append the result here as one JSON line")
    args = parser.parse_args()

    path = args.log or Path(f"/tmp/bench-replay-{args.tables}x{args.shoes}-s{args.seed}.jsonl")
    if not path.exists():
        make_log(path, args.tables, args.shoes, args.seed, args.injections * args.shoes)
    lines = lines_of(path)
    result: dict[str, Any] = {"log": str(path), "lines": len(lines), "bytes": sum(map(len, lines)), "load_average": load_average()}
    if not args.skip_offline:
        result["decode"] = decode_floor(lines, args.repeat)
        result["skeleton"] = skeleton(lines, args.repeat)
        result["least"] = least(lines, args.repeat)
        result["detectors_by_type"] = by_type(lines, args.repeat)
    result["offline"] = offline(
        path, lines, 1 if args.skip_offline else args.repeat, [int(n) for n in dict.fromkeys(args.workers.split(","))]
    )
    expected = set(result["offline"].pop("alert_ids"))
    if not args.skip_kafka:
        result["kafka"] = through_kafka(
            path, args.bootstrap, args.redis, expected, result["offline"]["rounds"], result["offline"]["events"], args.instances
        )
    result["load_average_end"] = load_average()
    print(json.dumps(result, indent=1))
    if "decode" in result:
        for name, figures in result["decode"].items():
            print(f"decode, {name}: best {max(figures['events_per_s']):,.0f} events/s")
        for name, figures in sorted(result["detectors_by_type"].items(), key=lambda item: -item[1]["share"]):
            print(f"the detectors, {name}: {figures['us_each']:.1f} us each ({figures['events']:,}), {figures['share']:.0%} of their time")
        for count, figures in result["offline"]["by_workers"].items():
            print(
                f"offline replay, {count} worker(s): best {max(figures['events_per_s']):,.0f} events/s, "
                f"{max(figures['rounds_per_s']):,.0f} rounds/s; {of_floor(figures)}"
            )
        figures = result["skeleton"]
        print(
            f"the replay's skeleton (every handler doing nothing), 1 worker: best {max(figures['events_per_s']):,.0f} events/s; {of_floor(figures)}"
        )
        figures = result["least"]
        print(
            f"the least a Python replay does (decode, table, id window, one lookup): best {max(figures['events_per_s']):,.0f} events/s; {of_floor(figures)}"
        )
    if args.json:
        with args.json.open("a") as out:
            out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
