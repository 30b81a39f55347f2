"""How long a scrape of the detectors' /metrics holds the interpreter, at N tables.

The detectors keep a series per table (and per dealer at it) for the room's boards. A scrape
renders them in the worker's process, and while it renders, the worker's event loop waits. This
fills the detectors' own families (``surveil.anomaly_detection.metrics``) as a floor of
``--tables`` tables looks after a shift (``--dealers`` dealers each, every outcome, an alert at
one table in ten), then times ``surveil.runtime.metrics.exposition()`` (what /metrics answers),
and, for comparison, the same samples through prometheus_client's own exposition (labelled
Counters and Gauges in a registry of their own: how the families were kept before).

    .venv/bin/python bench/scrape.py --tables 1000
"""

from __future__ import annotations

import argparse
import statistics
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from procstat import load_average
from surveil.anomaly_detection import metrics as detectors
from surveil.runtime import metrics

SCRAPE_INTERVAL_S = 5.0  # ops/prometheus: every target every 5 s


def fill(tables: int, dealers: int) -> None:
    now = time.time()
    for t in range(tables):
        table = f"BENCH-T{t:05d}"
        for d in range(dealers):
            for outcome in ("player", "banker", "tie"):
                detectors.ROUND_OUTCOMES.inc(table, f"D{(t * dealers + d) % 400:03d}", outcome, amount=7)
        detectors.TABLE_LAST_EVENT.set(table, value=now)
        detectors.TABLE_SHOE_IN_PLAY.set(table, value=1)
        if t % 10 == 0:
            detectors.TABLE_ALERTS.inc(table, "CARD_EXPOSED", "warning")


def as_before() -> CollectorRegistry:
    """The same samples in prometheus_client's labelled metrics."""
    registry = CollectorRegistry()
    for family in metrics.table_families():
        name = family.name.removesuffix("_total")
        if family.kind == "counter":
            counter = Counter(name, family.documentation, family.labelnames, registry=registry)
            for labels, value in family.series():
                counter.labels(*labels).inc(value)
        else:
            gauge = Gauge(name, family.documentation, family.labelnames, registry=registry)
            for labels, value in family.series():
                gauge.labels(*labels).set(value)
    return registry


def timed(render: object, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        render()  # type: ignore[operator]
        out.append(time.perf_counter() - started)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--dealers", type=int, default=4, help="dealers who worked each table (a shift's rotations)")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    load = load_average()
    fill(args.tables, args.dealers)
    lines = metrics.exposition().count(b"\n")
    before = as_before()
    for name, render in (
        ("/metrics now (by hand)", metrics.exposition),
        ("prometheus_client's exposition", lambda: generate_latest(before)),
    ):
        seconds = timed(render, args.repeat)
        median = statistics.median(seconds)
        print(
            f"{name:32s} {1000 * min(seconds):6.1f} ms best, {1000 * median:6.1f} ms median of {args.repeat}: "
            f"{100 * median / SCRAPE_INTERVAL_S:.2f} % of the event loop at a scrape every {SCRAPE_INTERVAL_S:.0f} s"
        )
    print(
        f"{args.tables} tables x {args.dealers} dealers: {lines:,} lines on /metrics; load average {load[0]:.1f} - {load_average()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
