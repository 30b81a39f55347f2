"""Draw a sweep of ``bench/pipeline.py live --tables 1000,2000,... --json SWEEP.json``: card read
to alert p99 (and the detectors' event to processed p99) against tables, and CPU ms per round,
each process stacked to the total; with a second file, its curves dashed (before) under the
first's (after).

    .venv/bin/python bench/plot_sweep.py SWEEP.json [BEFORE.json] --out docs/img/pipeline-sweep.png
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # a file, no display
import matplotlib.pyplot as plt  # noqa: E402

from surveil.anomaly_detection.metrics import LATENCY_BUCKETS  # noqa: E402

TARGET_LATENCY_MS = 100  # card read to alert p99, issue "The whole floor on one small machine"
TARGET_CPU_MS = 15  # everything together, a round
HISTOGRAM_TOP_S = LATENCY_BUCKETS[-1]  # the detectors' latency histograms' last finite bucket
# Bottom to top of the stack; a process not named here goes on top.
ORDER = ("kafka", "redis", "prometheus", "simulator", "shoe-reader", "table-controller", "settlement", "anomaly-detection")


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    document = json.loads(path.read_text())
    runs = sorted((r for r in document["runs"] if r.get("mode") == "live"), key=lambda r: r["tables"])
    if not runs:
        raise SystemExit(f"{path}: no live runs")
    return document, runs


def ms(seconds: float | None) -> float:
    return math.nan if seconds is None else 1000 * seconds


def caption(document: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    pace = {r["pace_seconds_per_round"] for r in runs}
    loads = [r["load_average"][k] for r in runs for k in ("min", "max")]
    return (
        f"{document['date'][:10]}, a round every {'/'.join(f'{p:g}' for p in sorted(pace))} s a table, "
        f"load average {min(loads):.1f} - {max(loads):.1f}"
    )


def plot(after: Path, before: Path | None, out: Path) -> None:
    doc_after, runs_after = load(after)
    files = [(doc_after, runs_after, "-", "after" if before else "")]
    if before:
        doc_before, runs_before = load(before)
        files.append((doc_before, runs_before, "--", "before"))
    fig, (latency, cpu) = plt.subplots(1, 2, figsize=(13, 5.2))

    for _, runs, style, label in files:
        tables = [r["tables"] for r in runs]
        prefix = f"{label}: " if label else ""
        latency.plot(tables, [ms(r["alert_latency_end_to_end"]["p99"]) for r in runs], style, marker="o", color="C3")
        latency.lines[-1].set_label(prefix + "card read to alert p99")
        latency.plot(tables, [ms(r["detection_latency"]["p99"]) for r in runs], style, marker="s", color="C0")
        latency.lines[-1].set_label(prefix + "detectors, event to processed p99")
        for r in runs:  # a size not sustained: its figures are of a growing backlog
            if not r["sustained"]:
                latency.annotate("not sustained", (r["tables"], ms(r["alert_latency_end_to_end"]["p99"])), fontsize=7, color="C3")
            if r["detection_latency"]["p99"] >= HISTOGRAM_TOP_S:  # the histogram's top bucket: at least that
                latency.annotate(f">= {HISTOGRAM_TOP_S:g} s", (r["tables"], ms(r["detection_latency"]["p99"])), fontsize=7, color="C0")
    latency.axhline(TARGET_LATENCY_MS, color="grey", linewidth=0.8, linestyle=":", label=f"target {TARGET_LATENCY_MS} ms")
    latency.set_yscale("log")
    latency.set_xlabel("tables")
    latency.set_ylabel("ms")
    latency.set_title("latency, p99")
    latency.legend(fontsize=8)

    # CPU: a bar a size, each process stacked to the total; "before" as its total, dashed.
    tables = [r["tables"] for r in runs_after]
    gaps = [b - a for a, b in zip(tables, tables[1:])]
    width = 0.4 * min(gaps) if gaps else 0.4 * tables[0]
    bottom = stacked_cpu(cpu, tables, [r["cpu_ms_per_round"] for r in runs_after], width, "after: " if before else "")
    for r, top in zip(runs_after, bottom):
        if not r["sustained"]:  # the services processed fewer rounds than were played
            cpu.annotate("not sustained:\nper round played", (r["tables"], top), ha="center", va="bottom", fontsize=7)
    if before:
        cpu.plot(
            [r["tables"] for r in runs_before],
            [r["cpu_ms_per_round"]["total"] for r in runs_before],
            "--",
            marker="o",
            color="black",
            label="before: total",
        )
    cpu.axhline(TARGET_CPU_MS, color="grey", linewidth=0.8, linestyle=":", label=f"target {TARGET_CPU_MS} ms, everything")
    cpu.set_xlabel("tables")
    cpu.set_ylabel("CPU ms per round")
    cpu.set_title("CPU per round, by process")
    cpu.legend(fontsize=7, loc="upper right")

    lines = [("after: " if before else "") + caption(doc_after, runs_after)]
    if before:
        lines.append("before: " + caption(doc_before, runs_before))
    fig.suptitle("bench/pipeline.py live: the whole floor on one machine\n" + "\n".join(lines), fontsize=10)
    save(fig, out)


def stacked_cpu(axes: Any, xs: list[float], cpu_ms: list[dict[str, float]], width: float, prefix: str = "") -> list[float]:
    """A bar at each of ``xs``, each process' CPU ms a round stacked (``ORDER``, bottom up) to
    the total; the bars' tops."""
    names = sorted(
        {n for by_process in cpu_ms for n in by_process if n != "total"},
        key=lambda n: (n not in ORDER, ORDER.index(n) if n in ORDER else 0, n),
    )
    bottom = [0.0] * len(xs)
    for n in names:
        heights = [by_process.get(n, 0.0) for by_process in cpu_ms]
        axes.bar(xs, heights, width, bottom=bottom, label=prefix + n)
        bottom = [b + h for b, h in zip(bottom, heights)]
    return bottom


def save(fig: Any, out: Path) -> None:
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", type=Path, help="bench/pipeline.py live --json's file (after)")
    parser.add_argument("before", type=Path, nargs="?", help="an earlier sweep, drawn dashed")
    parser.add_argument("--out", type=Path, default=Path("docs/img/pipeline-sweep.png"))
    args = parser.parse_args()
    plot(args.sweep, args.before, args.out)


if __name__ == "__main__":
    main()
