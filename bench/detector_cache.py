"""How often the detectors decode a table's value, and what keeping them decoded costs in memory.

The worker keeps, of the ``WATCH_CACHE_TABLES`` tables it last wrote, the objects it wrote; an
event of any other table has its value decoded from the store first. This replays the first
``--share`` of a recorded log of ``--tables`` tables (one shoe) through the faust app's own
functions, committing every ``COMMIT_INTERVAL_MS`` of play as the worker does
(``table_values.replayed``; no broker), once for each size in ``--cache``, and prints for each
the tables decoded an event, the time decoding took and the replay's own time. Then it decodes
``--sample`` tables' values as they stand at that point of the shoe and prints the memory of one
as Python objects (``tracemalloc``): what each table kept costs.

    .venv/bin/python bench/detector_cache.py --tables 3000 --share 0.3 --cache 2000,4000
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from pathlib import Path

from detector_gc import shoe_lines
from procstat import load_average
from surveil.anomaly_detection.parts import is_part
from surveil.runtime.config import Settings
from table_values import replayed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=3000, help="tables of the log made when --log is missing (one shoe)")
    parser.add_argument("--log", type=Path, help="a recorded log (made if missing: --tables tables, one shoe)")
    parser.add_argument("--share", type=float, default=0.3, help="the share of the log replayed: how far into the shoe")
    parser.add_argument("--cache", default="2000,4000", help="WATCH_CACHE_TABLES of each replay, comma-separated")
    parser.add_argument("--sample", type=int, default=300, help="tables whose decoded value is weighed")
    args = parser.parse_args()
    lines = shoe_lines(args.log, args.tables, args.share)
    from surveil.anomaly_detection import app

    commit_seconds = Settings.from_env("anomaly-detection").commit_interval_ms / 1000
    decoding = [0, 0.0]  # tables decoded, seconds
    stored_table = app.stored_table

    def timed(key: bytes) -> object:
        began = time.perf_counter()
        try:
            return stored_table(key)
        finally:
            decoding[0] += 1
            decoding[1] += time.perf_counter() - began

    for cache in (int(size) for size in args.cache.split(",")):
        app.WATCH_CACHE_TABLES, app.stored_table, decoding[:] = cache, timed, [0, 0.0]
        began = time.perf_counter()
        commits = sum(1 for _ in replayed(lines, commit_seconds, committed_offsets=True))
        took = time.perf_counter() - began
        app.stored_table = stored_table
        print(
            f"WATCH_CACHE_TABLES {cache:,}: replayed in {took:.1f} s, {commits:,} commits; "
            f"{decoding[0]:,} tables decoded ({decoding[0] / len(lines):.3f} an event), {decoding[1]:.1f} s decoding "
            f"({1e6 * decoding[1] / max(decoding[0], 1):.0f} µs each, {100 * decoding[1] / took:.1f} % of the replay); "
            f"load average {load_average()}",
            flush=True,
        )
    keys = [key for key in app.watch_table.data if not is_part(key)][: args.sample]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = [app.stored_table(key) for key in keys]
    weight = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    stored = sum(len(app.watch_table.data[key]) for key in keys)
    print(
        f"a table's value decoded: {weight / len(kept) / 1024:.1f} KB of Python objects "
        f"(its head stored: {stored / len(kept) / 1024:.1f} KB; {len(kept)} tables)"
    )


if __name__ == "__main__":
    main()
