"""``surveil verify ALERTS.jsonl``: checks the hash chain of a recorded alert log.

Each table's alerts must link, in the order recorded, from the empty string: an alert changed,
removed, inserted or moved breaks the chain at that line. An alert recorded twice with the same
id and chain (republished after a crash, docs/detection.md) is a repeat, not a break.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import click

from ..detect.alerts import chain_link
from ..events import codec
from ..events.models import AlertRaised
from .replay import open_log


@dataclass(frozen=True, slots=True)
class Break:
    line: int
    table_id: str
    alert_id: str
    reason: str


@dataclass
class Verification:
    alerts: Counter[str] = field(default_factory=Counter)  # by table
    repeats: int = 0
    breaks: list[Break] = field(default_factory=list)


def verify(lines: Iterator[bytes]) -> Verification:
    result = Verification()
    last: dict[str, str] = {}  # table -> chain of its last alert
    seen: dict[str, str | None] = {}  # alert id -> its chain
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            alert = codec.decode(line)
        except codec.InvalidEventError as error:
            result.breaks.append(Break(number, "?", "?", f"not an event: {error}"))
            continue
        if not isinstance(alert, AlertRaised):
            result.breaks.append(Break(number, alert.subject, "?", f"not an alert: {alert.event_type}"))
            continue
        d = alert.data
        if d.alert_id in seen and seen[d.alert_id] == d.chain:
            result.repeats += 1
            continue
        table = alert.subject
        previous = last.get(table, "")
        expected = chain_link(previous, d)
        if d.chain is None:
            result.breaks.append(Break(number, table, d.alert_id, "no chain value"))
        elif d.chain != expected:
            follows = "follows no earlier alert of the table" if not previous else "does not follow the table's previous alert"
            result.breaks.append(Break(number, table, d.alert_id, f"altered, or it {follows} (removed, inserted or moved alerts)"))
        result.alerts[table] += 1
        seen[d.alert_id] = d.chain
        last[table] = d.chain or expected  # go on from what the log says, to find every break
    return result


@click.command("verify")
@click.argument("alerts", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def verify_command(alerts: Path) -> None:
    """Check the hash chain of a recorded alert log (each table's alerts in order)."""
    with open_log(alerts) as stream:
        result = verify(iter(stream))
    total = sum(result.alerts.values())
    click.echo(f"{total} alerts at {len(result.alerts)} tables; {result.repeats} repeated; {len(result.breaks)} breaks")
    for item in result.breaks:
        click.echo(f"  line {item.line}: table {item.table_id}, alert {item.alert_id}: {item.reason}")
    if result.breaks:
        raise SystemExit(1)
