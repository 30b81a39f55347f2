"""Draw one long run of ``bench/pipeline.py live --parts N --json RUN.json`` part by part: the
latency (card read to alert p99, the detectors' tail from a record's publication, their
commits) and the CPU a round, each process stacked to the total, against the minutes of play, as
every table's state grows with its shoe.

    .venv/bin/python bench/plot_parts.py RUN.json --out docs/img/pipeline-hour.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # a file, no display
import matplotlib.pyplot as plt  # noqa: E402

from plot_sweep import TARGET_LATENCY_MS, ms, save, stacked_cpu  # noqa: E402

WARMUP_MINUTES = 1  # the window starts after the first minute of play (bench/pipeline.py)


def load(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    document = json.loads(path.read_text())
    runs = [r for r in document["runs"] if len(r.get("parts", ())) > 1]
    if not runs:
        raise SystemExit(f"{path}: no live run cut in parts (bench/pipeline.py live --parts N)")
    return document, runs[0]


def plot(path: Path, out: Path) -> None:
    document, run = load(path)
    parts = run["parts"]
    minutes = [WARMUP_MINUTES + (p["from_s"] + p["to_s"]) / 120 for p in parts]
    width = 0.8 * (parts[0]["to_s"] - parts[0]["from_s"]) / 60
    fig, (latency, cpu) = plt.subplots(1, 2, figsize=(13, 5.2))

    series = (
        ("card read to alert p99", lambda p: p["alerts"]["p99"], "o", "C3"),
        ("the detectors, from publication p99", lambda p: p["detection_since_published"]["p99"], "s", "C0"),
        ("the detectors' commits p50", lambda p: p["detectors_commit"]["p50"], "^", "C2"),
    )
    for label, figure, marker, color in series:
        latency.plot(minutes, [ms(figure(p)) for p in parts], marker=marker, color=color, label=label)
    latency.axhline(TARGET_LATENCY_MS, color="grey", linewidth=0.8, linestyle=":", label=f"target {TARGET_LATENCY_MS} ms")
    latency.set_ylim(bottom=0)
    latency.set_xlabel("minutes of play (each point a part of the window)")
    latency.set_ylabel("ms")
    latency.set_title("latency")
    latency.legend(fontsize=8)

    bottom = stacked_cpu(cpu, minutes, [p["cpu_ms_per_round"] for p in parts], width)
    cpu.set_ylim(top=1.45 * max(bottom))  # room for the legend above the bars
    cpu.set_xlabel("minutes of play")
    cpu.set_ylabel("CPU ms per round")
    cpu.set_title("CPU per round, by process")
    cpu.legend(fontsize=7, loc="upper center", ncol=4)

    load_average = run["load_average"]
    sustained = "sustained" if run["sustained"] else "NOT sustained"
    fig.suptitle(
        f"bench/pipeline.py live: {run['tables']:,} tables for {run['seconds'] / 60:.0f} minutes, {sustained}\n"
        f"{document['date'][:10]}, a round every {run['pace_seconds_per_round']:g} s a table, "
        f"load average {load_average['min']:.1f} - {load_average['max']:.1f}",
        fontsize=10,
    )
    save(fig, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="bench/pipeline.py live --parts N --json's file")
    parser.add_argument("--out", type=Path, default=Path("docs/img/pipeline-hour.png"))
    args = parser.parse_args()
    plot(args.run, args.out)


if __name__ == "__main__":
    main()
