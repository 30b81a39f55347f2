"""Draw what the pipeline's clients and the broker cost alone against what the whole pipeline
costs, at one floor size: CPU ms a round, each process stacked to the total, a bar a run
(``bench/clients_floor.py --json`` lines, then ``bench/pipeline.py --json`` files).

    .venv/bin/python bench/plot_clients.py --tables 3000 \\
        --clients bench/results/clients-floor-2026-12-06.jsonl \\
        --pipeline bench/results/run-2026-12-06-3000-beside-clients-a.json bench/results/run-2026-12-06-3000-beside-clients-b.json \\
        --out docs/img/clients-alone.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # a file, no display
import matplotlib.pyplot as plt  # noqa: E402

from plot_sweep import ORDER  # noqa: E402

# A client's place in the pipeline, by the process it stands for (bench/pipeline.py's names).
PLACES = {
    "broker": "kafka",
    "inputs": "simulator",
    "shoe": "shoe-reader",
    "table": "table-controller",
    "settlement": "settlement",
    "detectors": "anomaly-detection",
}


def clients_runs(path: Path, tables: int) -> list[dict[str, float]]:
    """Each run's CPU ms a round by the process it stands for, with the services' client and
    gathering."""
    runs = []
    for line in path.read_text().splitlines():
        run = json.loads(line)
        if run["tables"] == tables and run["kafka_gather_ms"] > 0 and run.get("relay_client", "kafka-python") == "kafka-python":
            runs.append({PLACES[name]: ms for name, ms in run["cpu_ms_per_round"].items() if name in PLACES})
    return runs


def pipeline_run(path: Path) -> dict[str, float]:
    document = json.loads(path.read_text())
    run = next(r for r in document.get("runs", [document]) if r.get("mode") == "live")
    return {name: ms for name, ms in run["cpu_ms_per_round"].items() if name != "total"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, required=True)
    parser.add_argument("--clients", type=Path, required=True, help="bench/clients_floor.py --json lines")
    parser.add_argument("--pipeline", type=Path, nargs="+", required=True, help="bench/pipeline.py --json files at the same size")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    clients = clients_runs(args.clients, args.tables)
    if not clients:
        raise SystemExit(f"{args.clients}: no run at {args.tables} tables gathering as the services do")
    bars = [(f"clients alone\n{n}", run) for n, run in enumerate(clients, start=1)]
    bars += [(f"whole pipeline\n{n}", pipeline_run(path)) for n, path in enumerate(args.pipeline, start=1)]
    names = [name for name in ORDER if any(name in run for _, run in bars)]
    names += sorted({name for _, run in bars for name in run} - set(names))

    figure, axes = plt.subplots(figsize=(3.5 + 1.1 * len(bars), 4.5))
    bottoms = [0.0] * len(bars)
    for name in names:
        heights = [run.get(name, 0.0) for _, run in bars]
        axes.bar(range(len(bars)), heights, bottom=bottoms, label=name, width=0.6)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    for x, total in enumerate(bottoms):
        axes.annotate(f"{total:.1f}", (x, total), ha="center", va="bottom", fontsize=9)
    axes.set_xticks(range(len(bars)), [label for label, _ in bars], fontsize=8)
    axes.set_ylabel("CPU ms a round")
    axes.set_title(f"{args.tables:,} tables: the Kafka clients and the broker alone, and the whole pipeline", fontsize=10)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1), title="process (or the client in its place)", title_fontsize=7)
    figure.tight_layout()
    figure.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
