"""The live faults suite run again and again, each run with a seed of its own (the faults strike at
other points, the disturbances take other inputs): how many runs held. A run holds when every
test of it passes; a failed run is printed with its seed (``FAULTS_SEED=<seed>`` runs it again).
Each run's output is kept in ``--logs``, and a failed run's temporary directory too, with the
services' own logs in it (pytest's ``--basetemp``; a run that held has its directory removed).

Needs the stack (``ops/stack.sh up`` on your ports) and its admin environment, as ``ops/test.sh``
sets it up:

    set -a; . .stack/secrets/stack.env; set +a
    .venv/bin/python bench/fault_runs.py --runs 20                       # the suite: tests/integration/faults/test_pipeline_faults.py
    .venv/bin/python bench/fault_runs.py --runs 5 -- -k broker           # only the broker test
    .venv/bin/python bench/fault_runs.py --runs 3 --seed 1234            # a failed run's faults, again
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = ["tests/integration/faults/test_pipeline_faults.py"]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="how many times to run the suite (default 20)")
    parser.add_argument(
        "--seed", type=int, default=None, help="every run with this seed (a failed run's, again); default: a new one each run"
    )
    parser.add_argument("--logs", type=Path, default=Path("/tmp/surveil-faults-bench"), help="where each run's output goes")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest arguments instead of the suite")
    args = parser.parse_args()
    if not os.environ.get("KAFKA_BOOTSTRAP"):
        print("needs the stack's admin environment: set -a; . .stack/secrets/stack.env; set +a", file=sys.stderr)
        return 2
    args.logs.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    print(f"{args.runs} runs of {' '.join(args.pytest_args or SUITE)}; logs in {args.logs}; load average {load()}", flush=True)
    held = 0
    for number in range(1, args.runs + 1):
        seed = random.SystemRandom().randrange(2**32) if args.seed is None else args.seed
        log = args.logs / f"run-{number:03d}-seed-{seed}.log"
        basetemp = log.with_suffix("")  # pytest's own rotate after three runs, and a failed run's logs with them
        began = time.monotonic()
        with log.open("wb") as out:
            done = subprocess.run(
                [
                    str(ROOT / ".venv" / "bin" / "pytest"),
                    "-p",
                    "no:cacheprovider",
                    "-rA",
                    "-s",
                    f"--basetemp={basetemp}",
                    *(args.pytest_args or SUITE),
                ],
                cwd=ROOT,
                env={**os.environ, "FAULTS_SEED": str(seed)},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        text = log.read_text(errors="replace")
        summary = [line for line in text.splitlines() if re.match(r"(PASSED|FAILED|ERROR|SKIPPED) tests/", line)]  # pytest -rA's
        ok = done.returncode == 0 and bool(summary) and not any(line.startswith(("SKIPPED", "ERROR")) for line in summary)
        held += ok
        if ok:
            shutil.rmtree(basetemp, ignore_errors=True)
        verdict = "held" if ok else f"FAILED (exit {done.returncode})"
        print(
            f"run {number:>3}/{args.runs}  seed {seed:>10}  {verdict:<18} {time.monotonic() - began:>5.0f} s  "
            f"load {load()}  {'' if ok else f'logs {basetemp}  '}{'; '.join(line.split('::')[-1][:70] for line in summary if not line.startswith('PASSED'))}",
            flush=True,
        )
    print(f"held {held}/{args.runs} in {time.monotonic() - started:,.0f} s; load average {load()}")
    return 0 if held == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
