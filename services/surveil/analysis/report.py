"""The replay's report for the terminal: alerts by rule, table, dealer and patron, and the money
at stake (the sum of the stakes each alert's evidence names)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..events.models import AlertRaised
from .replay import ReplayResult

SHOWN_BAD_LINES = 10


def stake_of(alert: AlertRaised) -> int:
    stake = alert.data.evidence.get("stake", 0)
    return stake if isinstance(stake, int) else 0


def _tally(alerts: Iterable[AlertRaised], key: Callable[[AlertRaised], str | None]) -> list[tuple[str, int, int]]:
    counts: Counter[str] = Counter()
    stakes: dict[str, int] = defaultdict(int)
    for alert in alerts:
        name = key(alert)
        if name:
            counts[name] += 1
            stakes[name] += stake_of(alert)
    return [(name, n, stakes[name]) for name, n in counts.most_common()]


def _table(title: str, column: str, rows: list[tuple[str, int, int]], limit: int = 15) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column(column)
    table.add_column("alerts", justify="right")
    table.add_column("money at stake", justify="right")
    for name, count, stake in rows[:limit]:
        table.add_row(name, str(count), f"{stake:,}")
    if len(rows) > limit:
        table.add_row(f"... {len(rows) - limit} more", "", "")
    return table


def render(result: ReplayResult, seconds: float) -> Group:
    alerts = result.alerts
    parts: list[Table | Text] = [
        Text(
            f"{result.events:,} events, {result.rounds_checked:,} rounds checked at {result.tables} tables "
            f"in {seconds:.1f} s ({result.events / max(seconds, 1e-9):,.0f} events/s); "
            f"{len(alerts)} alerts, money at stake {sum(map(stake_of, alerts)):,}; "
            f"{len(result.bad_lines)} malformed lines skipped.",
            style="bold",
        )
    ]
    if result.unboxed_bets:
        parts.append(
            Text(
                f"Art. 15 (standing bettors on the seated bettors' boxes) not checked for {result.unboxed_bets:,} bets: "
                "their bet.placed does not say the layout box their chips lie in (a log recorded before contract v1.2).",
                style="yellow",
            )
        )
    by_rule = Table(title="Alerts by rule", title_justify="left")
    for column in ("rule", "severity", "alerts", "money at stake"):
        by_rule.add_column(column, justify="right" if column in ("alerts", "money at stake") else "left")
    for key, count, stake in _tally(alerts, lambda a: f"{a.data.rule} {a.data.severity}"):
        name, severity = key.split(" ")  # a graded rule (ROUND_VOIDED) has a row per severity
        by_rule.add_row(name, severity, str(count), f"{stake:,}")
    parts.append(by_rule)
    parts.append(_table("Alerts by table", "table", _tally(alerts, lambda a: a.data.table_id)))
    parts.append(_table("Alerts by dealer", "dealer", _tally(alerts, lambda a: a.data.dealer_id)))
    parts.append(_table("Alerts by patron", "patron", _tally(alerts, lambda a: a.data.patron_id)))
    if result.bad_lines:
        bad = Table(title="Malformed lines (skipped)", title_justify="left")
        bad.add_column("line", justify="right")
        bad.add_column("why")
        for line in result.bad_lines[:SHOWN_BAD_LINES]:
            bad.add_row(str(line.number), line.reason)
        if len(result.bad_lines) > SHOWN_BAD_LINES:
            bad.add_row("...", f"{len(result.bad_lines) - SHOWN_BAD_LINES} more")
        parts.append(bad)
    return Group(*parts)
