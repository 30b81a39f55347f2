"""``surveil verify ALERTS.jsonl --key alert-signing.pub``: proves a recorded alert log with the
detectors' public key alone (``detect.alerts`` says what is chained and signed).

- Each table's alerts must link, in the order recorded, from the empty string, each link signed
  by the detectors: an alert changed (its data or its envelope), inserted, moved or forged breaks
  the chain at its line, even when whoever changed it recomputed the hashes.
- Each checkpoint must be signed, and every table it lists must be in the log with at least the
  alerts it counts, the one at that count being the one it names: a tail cut off a table, or a
  table taken out, shows against the checkpoints that came after. A checkpoint in parts (a
  partition of more tables than a record holds) must have every part.
- Every partition of the alerts topic (``partitions``, from the checkpoints) must have
  checkpoints, and the last of each must be as recent as the others' (within three intervals):
  a partition whose checkpoints, with its alerts, were cut off shows too.

An alert recorded twice with the same id and chain (republished after a crash, docs/detection.md)
is a repeat, not a break. Alerts after the last checkpoint of their partition are checked by their
chain alone: the summary says how many.

What no log can show by itself is a cut at the same moment across every partition: such a log
is the true log of an earlier moment. The summary prints the time of the latest checkpoint,
which its reader compares with when the log was taken.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import click

from ..detect.alerts import chain_link, checkpoint_bytes
from ..events import codec
from ..events.models import AlertCheckpoint, AlertRaised
from ..runtime.alert_keys import AlertVerifier
from .replay import open_log

STALE_INTERVALS = 3  # a partition's last checkpoint this many intervals before the newest: cut


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
    checkpoints: int = 0
    unconfirmed: int = 0  # alerts no checkpoint counts yet (raised after the last one)
    latest: datetime | None = None  # of the latest checkpoint
    breaks: list[Break] = field(default_factory=list)


def verify(lines: Iterable[bytes], verifier: AlertVerifier) -> Verification:
    result = Verification()
    chains: dict[str, list[str]] = {}  # table -> the chain of each of its alerts, in order
    seen: dict[str, str | None] = {}  # alert id -> its chain
    checkpoints: list[tuple[int, AlertCheckpoint]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            event = codec.decode(line)
        except codec.InvalidEventError as error:
            result.breaks.append(Break(number, "?", "?", f"not an event: {error}"))
            continue
        if isinstance(event, AlertCheckpoint):
            problem = verifier.problem(checkpoint_bytes(event), event.data.signature)
            if problem:
                result.breaks.append(Break(number, event.subject, event.id, f"checkpoint {problem}"))
            else:
                checkpoints.append((number, event))
            continue
        if not isinstance(event, AlertRaised):
            result.breaks.append(Break(number, event.subject, "?", f"not an alert: {event.event_type}"))
            continue
        d = event.data
        if d.alert_id in seen and seen[d.alert_id] == d.chain:
            result.repeats += 1
            continue
        table = event.subject
        links = chains.setdefault(table, [])
        previous = links[-1] if links else ""
        expected = chain_link(previous, event)
        if d.chain is None:
            result.breaks.append(Break(number, table, d.alert_id, "no chain value"))
        elif d.chain != expected:
            follows = "follows no earlier alert of the table" if not previous else "does not follow the table's previous alert"
            result.breaks.append(Break(number, table, d.alert_id, f"altered, or it {follows} (removed, inserted or moved alerts)"))
        else:
            problem = verifier.problem(d.chain.encode(), d.signature)
            if problem:
                result.breaks.append(Break(number, table, d.alert_id, f"{problem}: a chain anyone could have recomputed"))
        result.alerts[table] += 1
        seen[d.alert_id] = d.chain
        links.append(d.chain or expected)  # go on from what the log says, to find every break
    _check_against(checkpoints, chains, result)
    return result


_PART = re.compile(r"^(?P<at>checkpoint/\d+/[^/]+)/(?P<n>\d+)of(?P<of>\d+)$")


def _check_parts(checkpoints: list[tuple[int, AlertCheckpoint]], result: Verification) -> None:
    """A partition's checkpoint of one time split in parts (its signed id ``.../<n>of<N>``): every
    part in the log, or the tables of the one missing could have been taken out with it."""
    split: dict[str, tuple[int, int, str, set[int]]] = {}  # by the id without its part: first line, parts, subject, those found
    for number, checkpoint in checkpoints:
        part = _PART.match(checkpoint.id)
        if part:
            split.setdefault(part["at"], (number, int(part["of"]), checkpoint.subject, set()))[3].add(int(part["n"]))
    for at, (first, of, subject, found) in split.items():
        missing = ", ".join(str(n) for n in range(1, of + 1) if n not in found)
        if missing:
            result.breaks.append(
                Break(first, subject, at, f"checkpoint in {of} parts, part {missing} missing: its tables may have been removed")
            )


def _check_against(checkpoints: list[tuple[int, AlertCheckpoint]], chains: dict[str, list[str]], result: Verification) -> None:
    """Every checkpoint's claims against the log's chains; every partition's checkpoints present and recent."""
    confirmed: dict[str, int] = {}
    last: dict[int, datetime] = {}
    partitions: set[int] = set()
    for number, checkpoint in checkpoints:
        d = checkpoint.data
        partitions.add(d.partitions)
        last[d.partition] = max(last.get(d.partition, checkpoint.time), checkpoint.time)
        for table, head in d.tables.items():
            links = chains.get(table, [])
            confirmed[table] = max(confirmed.get(table, 0), head.count)
            if not links:
                reason = f"table removed: checkpoint at line {number} counts {head.count} alerts of it, the log has none"
            elif len(links) < head.count:
                reason = f"tail removed: checkpoint at line {number} counts {head.count} alerts, the log has {len(links)}"
            elif links[head.count - 1] != head.head:
                reason = f"checkpoint at line {number}: alert {head.count} is not the one it names (altered or moved)"
            else:
                continue
            result.breaks.append(Break(number, table, "-", reason))
    _check_parts(checkpoints, result)
    result.checkpoints = len(checkpoints)
    result.unconfirmed = sum(max(len(links) - confirmed.get(table, 0), 0) for table, links in chains.items())
    if not checkpoints:
        return
    if len(partitions) > 1:
        result.breaks.append(Break(0, "-", "-", f"checkpoints disagree on the partition count: {sorted(partitions)}"))
    result.latest = max(last.values())
    every = max(checkpoint.data.every for _, checkpoint in checkpoints)
    for partition in range(max(partitions)):
        if partition not in last:
            result.breaks.append(
                Break(0, f"partition/{partition}", "-", "no checkpoint of this partition: its tables may have been removed")
            )
        elif every and (result.latest - last[partition]).total_seconds() > STALE_INTERVALS * every:
            reason = f"its checkpoints stop at {last[partition]:%Y-%m-%d %H:%M:%S}, before the others': its tail may have been removed"
            result.breaks.append(Break(0, f"partition/{partition}", "-", reason))


@click.command("verify")
@click.argument("alerts", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--key",
    "keys",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    multiple=True,
    required=True,
    help="The detectors' public key (alert-signing.pub); again for each key the log may be signed with (a rotation).",
)
def verify_command(alerts: Path, keys: tuple[Path, ...]) -> None:
    """Prove a recorded alert log with the detectors' public key: each table's chain of signed
    alerts whole, and every signed checkpoint's count and head of every table in the log."""
    with open_log(alerts) as stream:
        result = verify(stream, AlertVerifier.from_files(keys))
    total = sum(result.alerts.values())
    latest = f"the latest at {result.latest:%Y-%m-%d %H:%M:%S} UTC" if result.latest else "none"
    click.echo(
        f"{total} alerts at {len(result.alerts)} tables; {result.repeats} repeated; {result.checkpoints} checkpoints ({latest}); "
        f"{result.unconfirmed} alerts after the last checkpoint; {len(result.breaks)} breaks"
    )
    for item in result.breaks:
        click.echo(f"  line {item.line}: {item.table_id}, alert {item.alert_id}: {item.reason}")
    if result.breaks:
        raise SystemExit(1)
