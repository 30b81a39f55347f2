"""Fuzzing every consumer with malformed input, at volume: at least ``--cases`` fuzzed records
into each of the eight consumers of ``tests/faults/fuzzing.py`` (the table-controller on the shoe
and input topics, settlement, the detectors on their three streams, the shoe-reader's line parser
and its connection handler). Every failure is counted and the first ones printed; none stops the
run. Exit status 1 if any consumer crashed or broke a rule (a refusal without its dead letter, a
refusal that changed something, an invalid output).

    .venv/bin/python bench/fuzz.py                       # 100,000 cases per consumer
    .venv/bin/python bench/fuzz.py --cases 5000 --only settlement --seed 7
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from faults import fuzzing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=100_000, help="fuzzed records per consumer (default 100,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", default=(), help="consumers whose name contains one of these")
    args = parser.parse_args()

    started = time.perf_counter()
    print(f"{'consumer':<40} {'cases':>9} {'rejected':>9} {'accepted':>9} {'crashed':>8} {'broken':>7} {'cases/s':>8}", flush=True)
    verdicts = []
    for consumer in fuzzing.iter_consumers(args.only):
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), transient=True) as bar:
            task = bar.add_task(consumer.name, total=args.cases)
            verdict = fuzzing.fuzz(
                consumer, args.cases, seed=args.seed, progress=lambda v, task=task: bar.update(task, completed=min(v.cases, args.cases))
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
        f"{sum(v.violations for v in verdicts):>7,}   in {time.perf_counter() - started:,.0f} s"
    )
    for verdict in verdicts:
        for failure in verdict.first_failures:
            print(f"\n{verdict.consumer}: {failure}")
    return 1 if any(v.failed for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
