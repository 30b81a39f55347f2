"""Fuzzing every consumer with malformed input, at volume: at least ``--cases`` fuzzed records
into each consumer of ``tests/faults/fuzzing.py``: the table-controller on the shoe and input
topics, settlement, the detectors on their three streams, the shoe-reader's line parser and its
connection handler, and Kafka records of any headers, keys, values and size through each
service's own per-record path (``tests/faults/record_fuzzing.py``: the Kafka runner of the
table-controller and of settlement, the detectors' faust app). Every failure is counted and the
first ones printed; none stops the run. Exit status 1 if any consumer crashed or broke a rule (a
refusal without its dead letter, a refusal that changed something, an invalid output, an output
or a state too large for the broker).

With ``--live N``, N hostile records go to the real broker's topics instead, into the services
as they run (``tests/faults/live_fuzzing.py``; the stack of ``ops/stack.sh``, credentials from
``.stack/secrets/stack.env``): each must be dead-lettered by every service that reads its topic,
and every service must stay up and commit past them all.

The seed is new on every run and printed; ``--seed`` runs one again.

    .venv/bin/python bench/fuzz.py                       # 100,000 cases per consumer
    .venv/bin/python bench/fuzz.py --cases 5000 --only settlement --seed 7
    .venv/bin/python bench/fuzz.py --live 2000           # into the running services
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from faults import fuzzing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=100_000, help="fuzzed records per consumer (default 100,000)")
    parser.add_argument("--seed", type=int, default=None, help="the run's seed (default: a new one, printed)")
    parser.add_argument("--only", nargs="*", default=(), help="consumers whose name contains one of these")
    parser.add_argument("--live", type=int, default=0, metavar="N", help="N hostile records into the running services instead")
    args = parser.parse_args()
    seed = random.SystemRandom().randrange(2**32) if args.seed is None else args.seed
    print(f"seed {seed} (--seed {seed} runs it again); load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    return live(args.live, seed) if args.live else offline(args, seed)


def offline(args: argparse.Namespace, seed: int) -> int:
    started = time.perf_counter()
    print(f"{'consumer':<40} {'cases':>9} {'rejected':>9} {'accepted':>9} {'crashed':>8} {'broken':>7} {'cases/s':>8}", flush=True)
    verdicts = []
    for consumer in fuzzing.iter_consumers(args.only):
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=True) as bar:
            task = bar.add_task(consumer.name, total=args.cases)
            verdict = fuzzing.fuzz(
                consumer, args.cases, seed=seed, progress=lambda v, task=task: bar.update(task, completed=min(v.cases, args.cases))
            )
        verdicts.append(verdict)
        rate = verdict.cases / verdict.seconds if verdict.seconds else 0.0
        print(
            f"{verdict.consumer:<40} {verdict.cases:>9,} {verdict.rejected:>9,} {verdict.accepted + verdict.dropped:>9,} "
            f"{verdict.crashed:>8,} {verdict.violations:>7,} {rate:>8,.0f}",
            flush=True,
        )
    total = sum(v.cases for v in verdicts)
    print(
        f"{'all':<40} {total:>9,} {sum(v.rejected for v in verdicts):>9,} "
        f"{sum(v.accepted + v.dropped for v in verdicts):>9,} {sum(v.crashed for v in verdicts):>8,} "
        f"{sum(v.violations for v in verdicts):>7,}   in {time.perf_counter() - started:,.0f} s, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    for verdict in verdicts:
        for failure in verdict.first_failures:
            print(f"\n{verdict.consumer}: {failure}")
    return 1 if any(v.failed for v in verdicts) else 0


def live(count: int, seed: int) -> int:
    import logging

    from faults import live_fuzzing

    logging.getLogger("kafka").setLevel(logging.WARNING)  # the clients' every connection, otherwise
    bootstrap, redis_url = os.environ.get("KAFKA_BOOTSTRAP"), os.environ.get("REDIS_URL")
    if not bootstrap or not redis_url:
        print("--live needs the stack's admin environment: set -a; . .stack/secrets/stack.env; set +a", file=sys.stderr)
        return 2
    with (
        tempfile.TemporaryDirectory(prefix="fuzz-live-") as logs,
        live_fuzzing.own_deployment(bootstrap, redis_url, Path(logs)) as deployment,
    ):
        try:
            verdict = live_fuzzing.fuzz_live(deployment, count, seed, progress=lambda line: print(f"  {line}", flush=True))
        except AssertionError as failure:
            print(f"FAILED (seed {seed}): {str(failure)[:4000]}")
            return 1
    print(
        f"{verdict.records:,} hostile records ({verdict.bytes / 1e6:,.1f} MB; by topic: {dict(verdict.by_topic)}) into the running "
        f"services: {verdict.letters:,} dead letters, one per record and reader; every service up and committed past them; "
        f"the shoe-reader started; in {verdict.seconds:,.0f} s, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
