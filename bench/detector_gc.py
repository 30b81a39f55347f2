"""What a full garbage collection walks and costs in the detectors, their tables' state mid-shoe.

CPython's cyclic collector walks every object it tracks, now and then all of them at once (a full,
generation 2, collection), and the process does nothing else meanwhile: in the detectors' worker,
no event is processed. This replays the first ``--share`` of a recorded log of ``--tables`` tables
(one shoe) through the faust app's own functions, committing every ``COMMIT_INTERVAL_MS`` of
play as the worker does (``table_values.replayed``; no broker), so the tables hold what they hold
at that point of a shoe. Then it counts the objects the collector tracks that the replay made, by
type (what importing the app made and the log itself are frozen out of the count first,
``gc.freeze()``, as the service freezes its start-up), and times full collections (median and
least of ``--repeat``). It also counts the collections the replay itself set off, by generation:
what the detectors' own objects cost the collector, without faust's and aiokafka's.

    .venv/bin/python bench/detector_gc.py --tables 1000
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections import Counter
from pathlib import Path

from procstat import load_average
from replay import lines_of, make_log
from surveil.runtime.config import Settings
from table_values import replayed


def shoe_lines(log: Path | None, tables: int, share: float) -> list[bytes]:
    """The first ``share`` of the lines of ``log``, or of a log of ``tables`` tables and one shoe,
    made if missing."""
    path = log or Path(f"/tmp/bench-gc-{tables}x1-s1.jsonl")
    if not path.exists():
        make_log(path, tables, 1, 1, 6)
    lines = [line for line in lines_of(path) if line.strip()]
    lines = lines[: int(len(lines) * share)]
    print(f"log: {path}, replaying its first {len(lines):,} events; load average {load_average()}", flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=1000, help="tables of the log made when --log is missing (one shoe)")
    parser.add_argument("--log", type=Path, help="a recorded log (made if missing: --tables tables, one shoe)")
    parser.add_argument("--share", type=float, default=0.6, help="the share of the log replayed: how far into the shoe")
    parser.add_argument("--repeat", type=int, default=5, help="full collections timed")
    args = parser.parse_args()
    lines = shoe_lines(args.log, args.tables, args.share)
    from surveil.anomaly_detection import app  # noqa: F401  (imported before the freeze: start-up, not state)

    gc.collect()
    gc.freeze()  # the app's start-up and the log's lines: not the state's
    began = time.perf_counter()
    commit_seconds = Settings.from_env("anomaly-detection").commit_interval_ms / 1000
    collections: Counter[int] = Counter()  # made during the replay, by generation: what its own objects cost

    def count(phase: str, info: dict[str, int]) -> None:
        collections[info["generation"]] += phase == "stop"

    gc.callbacks.append(count)
    commits = sum(1 for _ in replayed(lines, commit_seconds, committed_offsets=True))
    gc.callbacks.remove(count)
    print(
        f"replayed in {time.perf_counter() - began:.0f} s, {commits:,} commits; the collector ran meanwhile "
        + ", ".join(f"{collections[generation]:,} times on generation {generation}" for generation in range(3)),
        flush=True,
    )
    gc.collect()
    by_type = Counter(type(held).__qualname__ for held in gc.get_objects())
    pauses = []
    for _ in range(args.repeat):
        began = time.perf_counter()
        gc.collect()
        pauses.append((time.perf_counter() - began) * 1000)
    print(f"objects the collector tracks, made by the replay: {sum(by_type.values()):,}")
    print("  " + ", ".join(f"{name} {count:,}" for name, count in by_type.most_common(12)))
    print(f"a full collection: median {statistics.median(pauses):.1f} ms, least {min(pauses):.1f} ms ({args.repeat} timed)")
    print(f"load average at the end {load_average()}")


if __name__ == "__main__":
    main()
