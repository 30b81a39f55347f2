"""``surveil demo``: the whole pipeline in one process, on a simulated floor, with no broker.

The simulated tables' shoe lines go through the shoe-reader's parser, their console and sensor
inputs through the table-controller, the table events through settlement, and every event through
the anomaly detectors: the same code the live services run, on the in-process bus. A live view
shows the tables, the rounds and the alerts as they happen; at the end the recorded log, the
alerts and the incident report are written to the output folder.
"""

from __future__ import annotations

import gzip
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

import click
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .analysis import report
from .analysis.replay import ReplayResult
from .core.findings import AlertCode
from .core.profiles import DEFAULT_PROFILE, profile_names
from .detect.floor import FloorWatch
from .embedded.record import record
from .events import codec, models
from .sim.floor import Floor
from .sim.injections import parse_codes

DEMO_INJECTIONS = "DRAW_BANKER_EXTRA,LATE_BET,CARD_MISMATCH,PAYOUT_MISMATCH,SQUEEZE_HOLDER,PATRON_WIN_RATE"
SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
OUTCOME_LETTER = {"player": "P", "banker": "B", "tie": "T"}


@dataclass
class TableView:
    shoe: str = ""
    round_no: int = 0
    dealer: str = ""
    last: str = ""
    rounds: int = 0
    house_net: int = 0
    alerts: int = 0


@dataclass
class FloorView:
    """What the live view shows, updated event by event."""

    tables: dict[str, TableView] = field(default_factory=dict)
    alerts: deque[models.AlertRaised] = field(default_factory=lambda: deque(maxlen=12))
    by_severity: Counter[str] = field(default_factory=Counter)
    events: int = 0
    clock: str = ""

    def see(self, event: models.Event) -> None:
        self.events += 1
        self.clock = event.time.strftime("%H:%M:%S")
        view = self.tables.setdefault(event.subject, TableView())
        d = event.data  # type: ignore[attr-defined]
        if isinstance(d, models.RoundOpenedData):
            view.shoe, view.round_no, view.dealer = d.shoe_id, d.round_no, d.dealer_id
        elif isinstance(d, models.RoundCompletedData):
            view.rounds += 1
            pairs = "".join(name for name, on in (("+PP", d.player_pair), ("+BP", d.banker_pair)) if on)
            view.last = f"{OUTCOME_LETTER[d.outcome]} {d.player_total}-{d.banker_total}{pairs}"
        elif isinstance(d, models.RoundSettledData):
            view.house_net += d.house_net

    def alert(self, alert: models.AlertRaised) -> None:
        self.alerts.appendleft(alert)
        self.by_severity[alert.data.severity] += 1
        self.tables.setdefault(alert.subject, TableView()).alerts += 1

    def render(self) -> Group:
        floor = Table(title=f"The floor at {self.clock}", title_justify="left", expand=True)
        for column in ("table", "shoe", "round", "dealer", "last result", "rounds", "house result", "alerts"):
            floor.add_column(column, justify="right" if column in ("round", "rounds", "house result", "alerts") else "left")
        for table_id in sorted(self.tables):
            t = self.tables[table_id]
            alerts = Text(str(t.alerts), style="bold red" if t.alerts else "")
            floor.add_row(table_id, t.shoe, str(t.round_no), t.dealer, t.last, str(t.rounds), f"{t.house_net:,}", alerts)
        feed = Table(show_header=False, box=None, expand=True)
        feed.add_column("time", width=8)
        feed.add_column("table", width=5)
        feed.add_column("rule", width=22)
        feed.add_column("summary", ratio=1)
        for alert in self.alerts:
            style = SEVERITY_STYLE.get(alert.data.severity, "")
            feed.add_row(alert.time.strftime("%H:%M:%S"), alert.subject, Text(alert.data.rule, style=style), alert.data.summary)
        counts = ", ".join(f"{n} {severity}" for severity, n in self.by_severity.most_common()) or "none yet"
        return Group(floor, Panel(feed, title=f"Alerts ({counts})", title_align="left"))


@click.command("demo")
@click.option("--tables", type=click.IntRange(min=1), default=6, show_default=True)
@click.option("--shoes", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--seed", type=int, default=7, show_default=True)
@click.option("--profile", type=click.Choice(profile_names()), default=DEFAULT_PROFILE, show_default=True)
@click.option("--inject", "inject_text", default=DEMO_INJECTIONS, show_default=True, metavar="CODE[,CODE...]")
@click.option("--speed", type=click.FloatRange(min=0), default=200.0, show_default=True, help="Times real pace (0: as fast as possible).")
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("demo-output"), show_default=True)
def demo_command(tables: int, shoes: int, seed: int, profile: str, inject_text: str, speed: float, out_dir: Path) -> None:
    """Run the whole pipeline on a simulated floor in this process (no broker), live."""
    out_dir.mkdir(parents=True, exist_ok=True)
    log_path, alerts_path = out_dir / "floor.jsonl.gz", out_dir / "alerts.jsonl"
    floor = Floor(tables, shoes, seed, profile, parse_codes(inject_text))
    detectors = FloorWatch()
    view = FloorView()
    result = ReplayResult()
    console = Console()
    started = time.perf_counter()
    first_time: float | None = None
    last_refresh = 0.0

    with gzip.open(log_path, "wb") as log, open(alerts_path, "wb") as alerts_file, Live(console=console, auto_refresh=False) as live:

        def on_event(event: models.Event) -> None:
            nonlocal first_time, last_refresh
            log.write(codec.encode(event) + b"\n")
            result.events += 1
            result.events_by_type[event.event_type] += 1
            view.see(event)
            for alert in detectors.feed(event):
                emit(alert)
            moment = event.time.timestamp()
            first_time = moment if first_time is None else first_time
            if speed:  # keep the floor's clock at ``speed`` times real time
                ahead = (moment - first_time) / speed - (time.perf_counter() - started)
                if ahead > 0:
                    time.sleep(ahead)
            if time.perf_counter() - last_refresh > 0.1:
                last_refresh = time.perf_counter()
                live.update(view.render(), refresh=True)

        def emit(alert: models.AlertRaised) -> None:
            result.alerts.append(alert)
            alerts_file.write(codec.encode(alert) + b"\n")
            view.alert(alert)

        record(floor, lambda event: None, lambda label: None, on_event)
        for alert in detectors.flush():
            emit(alert)
        live.update(view.render(), refresh=True)

    result.rounds_checked, result.tables, result.unboxed_bets = detectors.rounds_checked, len(detectors.tables), detectors.unboxed_bets
    console.print(report.render(result, time.perf_counter() - started))
    console.print(f"\nRecorded log: {log_path}  (replay it: surveil replay {log_path})\nAlerts: {alerts_path}")
    missing = set(parse_codes(inject_text)) - {AlertCode(a.data.rule) for a in result.alerts}
    if missing:
        console.print(f"[bold red]Injected but not detected: {', '.join(sorted(missing))}")
        raise SystemExit(1)
