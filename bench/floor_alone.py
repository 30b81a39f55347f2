"""The simulated floor alone: what the benchmarks' floor process spends at N tables at real pace,
without the services beside it.

The floor is the one ``bench/pipeline.py live`` plays (``_play``: its actions generated and its
records made ahead, then sent at their times by ``play_live`` on uvloop's loop), its inputs to a
fresh deployment's topics on the real broker through librdkafka, as the floor's principal. Its
shoe lines go to a stand-in reader, in a process of its own, that acknowledges each read
``--ack-ms`` after it (as the shoe-reader does once its producer has the lines on the broker), so
the floor's connection wakes as it does in the pipeline. Over the window after ``--warm-up``:
the floor's CPU a round (utime + stime from /proc), each of its threads' (its interpreter's,
librdkafka's) and their voluntary context switches a second (their wakes), and the load average.
A round is a table's: N tables play N / 50 rounds a second.

    eval "$(ops/stack.sh env)"
    .venv/bin/python bench/floor_alone.py --tables 1000 --seconds 100 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from pipeline import FLOOR_SIMULATOR, PACE, Pipeline, PlaySpec, Simulator
from procstat import load_average, proc_cpu_seconds, proc_status
from surveil.sim.live import TICK_SECONDS


def stand_in_reader(port: int, ack_seconds: float, ready: Any) -> None:
    """Child process: acknowledge each read's lines (the last sequence number of each table in
    it), ``ack_seconds`` after the read."""
    import uvloop

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        rest = b""
        while data := await reader.read(65536):
            *lines, rest = (rest + data).split(b"\n")
            last = {line.split(b" ", 3)[1]: line.split(b" ", 3)[2] for line in lines}  # a line: "<ver> <table> <seq> ..."
            await asyncio.sleep(ack_seconds)
            writer.write(b"".join(b"ACK %s %s\n" % acked for acked in last.items()))

    async def main() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", port)
        ready.send(True)
        await server.serve_forever()

    uvloop.run(main())


def threads(pid: int) -> dict[str, tuple[float, int]]:
    """Each thread's CPU seconds and voluntary context switches, summed by the thread's name."""
    seen: dict[str, tuple[float, int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        tid = int(task.name)
        try:
            name = (task / "comm").read_text().strip()
            cpu, switches = proc_cpu_seconds(pid, tid), proc_status(pid, "voluntary_ctxt_switches", tid)
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended meanwhile
        was = seen.get(name, (0.0, 0))
        seen[name] = (was[0] + cpu, was[1] + switches)
    return seen


def measure(tables: int, seconds: float, warm_up: float, tick: float, ack_seconds: float, bootstrap: str, redis_url: str) -> dict[str, Any]:
    with Pipeline(bootstrap, redis_url, services=()) as pipeline:
        context = multiprocessing.get_context("spawn")
        ready, told = context.Pipe(duplex=False)
        reader = context.Process(target=stand_in_reader, args=(pipeline.reader_port, ack_seconds, told), daemon=True)
        reader.start()
        try:
            ready.recv()
            start = time.time() + 20 + tables / 50  # generating takes about a second a 50 tables
            play = PlaySpec(
                tables,
                1,
                7,
                PACE,
                seconds + 10,
                (),
                start,
                pipeline.settings(FLOOR_SIMULATOR),
                pipeline.reader_port,
                pipeline.device_keys,
                tick,
            )
            simulator = Simulator(play)
            simulator.generated()
            while time.time() < start + warm_up:
                time.sleep(0.2)
            before, began, load = threads(simulator.pid), time.time(), [load_average()[0]]
            while time.time() < start + seconds:
                time.sleep(1)
                load.append(load_average()[0])
            after, ended = threads(simulator.pid), time.time()
            simulator.process.kill()
        finally:
            reader.kill()
    window = ended - began
    rounds = window * tables / PACE
    spent = {
        name: (cpu - before.get(name, (0.0, 0))[0], switches - before.get(name, (0.0, 0))[1]) for name, (cpu, switches) in after.items()
    }
    cpu_seconds = sum(cpu for cpu, _ in spent.values())
    return {
        "ms_a_round": cpu_seconds * 1000 / rounds,
        "core": cpu_seconds / window,
        "threads": {name: (cpu * 1000 / rounds, switches / window) for name, (cpu, switches) in spent.items() if cpu or switches > window},
        "window": window,
        "load": (min(load), max(load)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=100, help="of play at real pace (a round every 50 s a table)")
    parser.add_argument("--warm-up", type=float, default=20, help="seconds of play before the window")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--tick-ms", type=float, default=TICK_SECONDS * 1000, help="the floor's loop wakes at most this often (play_live)")
    parser.add_argument("--ack-ms", type=float, default=5, help="the stand-in reader acknowledges a read this long after it")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = parser.parse_args()
    figures = []
    for run in range(1, args.runs + 1):
        print(
            f"[floor] run {run} of {args.runs}: {args.tables} tables, {args.seconds:g} s of play, tick {args.tick_ms:g} ms",
            file=sys.stderr,
            flush=True,
        )
        result = measure(args.tables, args.seconds, args.warm_up, args.tick_ms / 1000, args.ack_ms / 1000, args.bootstrap, args.redis)
        figures.append(result["ms_a_round"])
        each = ", ".join(f"{name} {ms:.2f} ms, {wakes:.0f} wakes/s" for name, (ms, wakes) in sorted(result["threads"].items()))
        print(
            f"{args.tables} tables, tick {args.tick_ms:g} ms: {result['ms_a_round']:.2f} ms of CPU a round ({result['core']:.1%} of a core) "
            f"over {result['window']:.0f} s; threads: {each}; load {result['load'][0]:.1f} - {result['load'][1]:.1f}",
            flush=True,
        )
    if len(figures) > 1:
        print(f"{len(figures)} runs: {min(figures):.2f} - {max(figures):.2f} ms a round, median {statistics.median(figures):.2f}")


if __name__ == "__main__":
    main()
