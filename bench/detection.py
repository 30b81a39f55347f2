"""Detection scored on the simulator's labelled runs.

    .venv/bin/python bench/detection.py [--clean-rounds 100000] [--seeds 5]

1. Recall and precision per alert code: for each code the simulator can inject, ``--seeds`` runs
   with that one injection; every label must be matched by an alert of its code at its table
   (and round, where the label names one), and any other alert counts as false.
2. A clean floor of at least ``--clean-rounds`` rounds: every alert is false; pattern alerts
   are reported as false alarms per 10,000 table-rounds.
3. Rounds to detection of each injected pattern: how many rounds of the table had been dealt
   in the labelled shoe when the alert came.

Everything runs in process: the simulator's devices through the real table-controller and
settlement on the in-process bus, then the detectors, event by event.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from surveil.core.findings import AlertCode
from surveil.detect.floor import FloorWatch as Detectors
from surveil.embedded.record import record
from surveil.events import models as m
from surveil.sim.floor import Floor
from surveil.sim.injections import SCOPES, Label

PATTERNS = (AlertCode.OUTCOME_DRIFT, AlertCode.PATRON_WIN_RATE, AlertCode.DEALER_ERROR_RATE, AlertCode.SHOE_REPEAT)
SETTLEMENT_SIDE = (AlertCode.PAYOUT_MISMATCH, AlertCode.UNSETTLED_BET, AlertCode.DUPLICATE_SETTLEMENT)


@dataclass
class Run:
    alerts: list[m.AlertRaised] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    rounds: int = 0
    # per table: the shoe of each completed round, in order, and when it completed
    completed: dict[str, list[tuple[str, float]]] = field(default_factory=lambda: defaultdict(list))


def play(tables: int, shoes: int, seed: int, profile: str, inject: tuple[AlertCode, ...]) -> Run:
    run = Run()
    detectors = Detectors()

    def on_event(event: m.Event) -> None:
        if isinstance(event, m.RoundCompleted):
            run.rounds += 1
            run.completed[event.subject].append((event.data.shoe_id, event.time.timestamp()))
        run.alerts.extend(detectors.feed(event))

    record(Floor(tables, shoes, seed, profile, inject), on_event, run.labels.append)
    run.alerts.extend(detectors.flush())
    return run


def matches(label: Label, alert: m.AlertRaised) -> bool:
    d = alert.data
    if d.rule != label.code or d.table_id != label.table_id:
        return (
            d.rule == label.code
            and label.code in (AlertCode.PATRON_WIN_RATE, AlertCode.DEALER_ERROR_RATE)
            and (d.patron_id == label.patron_id if label.patron_id else d.dealer_id == label.dealer_id)
        )
    return label.round_id is None or d.round_id in (None, label.round_id)


def profile_for(code: AlertCode) -> str:
    return "sjm" if code.name.startswith("TIE_BET") else "dicj"


def injectable() -> list[AlertCode]:
    return [code for code in AlertCode if code in SCOPES]


def score(seeds: int, console: Console) -> list[tuple[str, int, int, int]]:
    rows = []
    codes = injectable()
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("injections", total=len(codes) * seeds)
        for code in codes:
            labelled = found = false = 0
            for seed in range(seeds):
                run = play(3, 3 if code is AlertCode.SHOE_REPEAT else 2, 1000 + seed, profile_for(code), (code,))
                wanted = [label for label in run.labels if label.code == code or code is AlertCode.DEALER_ERROR_RATE]
                labelled += sum(1 for label in wanted if label.code == code)
                found += sum(1 for label in wanted if label.code == code and any(matches(label, a) for a in run.alerts))
                false += sum(1 for a in run.alerts if not any(matches(label, a) for label in run.labels))
                progress.advance(task)
            rows.append((code.value, labelled, found, false))
    return rows


def clean(rounds: int, console: Console) -> tuple[Run, float]:
    tables, shoes = 100, max(1, round(rounds / 100 / 70) + 1)
    started = time.perf_counter()
    with console.status(f"a clean floor: {tables} tables x {shoes} shoes"):
        run = play(tables, shoes, 7, "dicj", ())
    return run, time.perf_counter() - started


def rounds_to_detection(seeds: int) -> dict[str, list[int]]:
    found: dict[str, list[int]] = defaultdict(list)
    for seed in range(seeds):
        run = play(4, 3, 2000 + seed, "dicj", PATTERNS)
        for label in run.labels:
            if label.code not in PATTERNS:
                continue
            hits = [a for a in run.alerts if matches(label, a)]
            if not hits:
                found[label.code].append(-1)
                continue
            when = min(a.time.timestamp() for a in hits)
            shoe_rounds = [t for shoe, t in run.completed[label.table_id] if shoe == label.shoe_id]
            found[label.code].append(sum(1 for t in shoe_rounds if t <= when))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clean-rounds", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    console = Console(stderr=True)
    out = Console()
    load_at_start = os.getloadavg()

    table = Table(title=f"Injected irregularities ({args.seeds} runs each)", title_justify="left")
    for column in ("code", "injected", "found", "recall", "false alerts"):
        table.add_column(column, justify="left" if column == "code" else "right")
    misses = 0
    for code, labelled, found, false in score(args.seeds, console):
        misses += labelled - found
        table.add_row(code, str(labelled), str(found), f"{found / labelled:.0%}" if labelled else "-", str(false))
    out.print(table)

    run, seconds = clean(args.clean_rounds, console)
    by_rule = Counter(a.data.rule for a in run.alerts)
    out.print(
        f"Clean floor: {run.rounds:,} rounds in {seconds:.0f} s, {len(run.alerts)} alerts "
        f"({dict(by_rule) or 'none'}); rule alerts (false): {sum(n for r, n in by_rule.items() if r not in PATTERNS)}"
    )
    for code in PATTERNS:
        out.print(f"  {code.value}: {by_rule[code] / run.rounds * 10_000:.3f} false alarms per 10,000 table-rounds")

    speed = Table(title="Rounds to detection of injected patterns (rounds of the labelled shoe dealt)", title_justify="left")
    for column in ("pattern", "runs", "detected", "rounds (each run)"):
        speed.add_column(column)
    for code, rounds in sorted(rounds_to_detection(args.seeds).items()):
        speed.add_row(code, str(len(rounds)), str(sum(r >= 0 for r in rounds)), ", ".join(map(str, rounds)))
    out.print(speed)
    out.print(
        f"Load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in load_at_start)} at the start, {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end"
    )
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
