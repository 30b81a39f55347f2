"""``surveil ledger`` (what a table or a patron staked and was paid) and ``surveil reconcile``
(a recorded log settled again and compared with the ledger)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import fields
from functools import reduce
from pathlib import Path
from typing import Any

import click
import redis
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from ..runtime.config import redacted
from ..runtime.state import RedisBackend
from ..settlement import ledger as ledger_
from ..settlement import reconcile as reconcile_
from ..settlement.ledger import Ledger, PatronTotals, TableTotals

redis_option = click.option(
    "--redis",
    "redis_url",
    default=lambda: os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
    show_default="REDIS_URL, else redis://127.0.0.1:6379/0",
    help="Where the ledger is.",
)
prefix_option = click.option(
    "--redis-prefix",
    default=lambda: os.environ.get("REDIS_PREFIX", ""),
    show_default="REDIS_PREFIX",
    help="The deployment's Redis key prefix.",
)
shift_option = click.option("--shift", help="One shift, e.g. 2026-11-29/3 (Macau gaming day / 1-3 from 07:00).")


def open_ledger(redis_url: str, redis_prefix: str) -> Ledger:
    client = redis.Redis.from_url(redis_url)
    try:
        client.ping()
    except redis.RedisError as error:
        raise click.ClickException(f"the ledger's Redis at {redacted(redis_url)} does not answer: {error}") from None
    return Ledger(RedisBackend(client, redis_prefix))


def _table(title: str, totals: Mapping[str, TableTotals] | Mapping[str, PatronTotals]) -> str:
    """Totals as aligned columns, one row per shift, then their sum when there are several."""
    if not totals:
        return f"{title}: nothing in the ledger"
    rows: dict[str, Any] = dict(totals)
    names = [f.name for f in fields(next(iter(rows.values())))]
    if len(rows) > 1:
        rows["all"] = reduce(ledger_.add, totals.values())
    widths = [max(len(name), *(len(f"{getattr(t, name):,}") for t in rows.values())) for name in names]
    shift_width = max(len("shift"), *map(len, rows))
    lines = [title, "  ".join(["shift".ljust(shift_width), *(n.rjust(w) for n, w in zip(names, widths))])]
    for shift, totals in rows.items():
        values = (f"{getattr(totals, n):,}".rjust(w) for n, w in zip(names, widths))
        lines.append("  ".join([shift.ljust(shift_width), *values]))
    return "\n".join(lines)


@click.group()
def ledger() -> None:
    """What the settlement ledger holds, per table shift, patron and round."""


@ledger.command()
@click.argument("table_id")
@shift_option
@redis_option
@prefix_option
def table(table_id: str, shift: str | None, redis_url: str, redis_prefix: str) -> None:
    """A table's takings: staked, paid out, commission and the house's result, per shift."""
    book = open_ledger(redis_url, redis_prefix)
    rows = {shift: book.table(table_id, shift)} if shift else book.table_shifts(table_id)
    click.echo(_table(f"Table {table_id} (house_net: what the house won)", rows))


@ledger.command()
@click.argument("patron_id")
@shift_option
@redis_option
@prefix_option
def patron(patron_id: str, shift: str | None, redis_url: str, redis_prefix: str) -> None:
    """What a patron staked, was paid and won (net), per shift."""
    book = open_ledger(redis_url, redis_prefix)
    rows = {shift: book.patron(patron_id, shift)} if shift else book.patron_shifts(patron_id)
    click.echo(_table(f"Patron {patron_id} (net: what the patron won)", rows))


@ledger.command(name="round")
@click.argument("table_id")
@click.argument("round_id")
@redis_option
@prefix_option
def round_(table_id: str, round_id: str, redis_url: str, redis_prefix: str) -> None:
    """One round's settlement and its bets."""
    book = open_ledger(redis_url, redis_prefix)
    record = book.round(table_id, round_id)
    if record is None:
        raise click.ClickException(f"round {round_id} at {table_id} is not in the ledger")
    click.echo(
        f"Round {round_id} at {table_id}, {record.outcome}, {record.time.isoformat()} (shift {record.shift}): "
        f"staked {record.staked:,}, paid out {record.paid_out:,}, commission {record.commission:,}, "
        f"house {record.house_net:+,}"
    )
    for bet_id in record.bet_ids:
        bet = book.bet(table_id, round_id, bet_id)
        if bet is not None:
            click.echo(
                f"  {bet.bet_id}  {bet.patron_id}  {bet.spot:<11} {bet.amount:>10,}  {bet.result:<7} "
                f"net {bet.net:+,}  commission {bet.commission:,}"
            )


@click.command()
@click.argument("log", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@shift_option
@redis_option
@prefix_option
def reconcile(log: Path, shift: str | None, redis_url: str, redis_prefix: str) -> None:
    """Settle the table events of LOG (CloudEvents JSON lines, .gz or not) again, offline, and
    compare with the ledger in Redis: every difference per table shift, patron, round and bet,
    for SHIFT or every shift in the log. Exit status 1 when there is any difference."""
    with Progress(
        TextColumn("settling {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task(log.name, total=log.stat().st_size)
        result = reconcile_.recompute(reconcile_.log_lines(log, lambda done: progress.update(task, completed=done)))
    click.echo(
        f"{log}: {result.events:,} events, {result.invalid:,} not contract events, {len(result.dead_letters):,} refused by settlement",
        err=True,
    )
    stored = open_ledger(redis_url, redis_prefix)
    differences = 0
    for name in [shift] if shift else result.ledger.shifts():
        recomputed = result.ledger.shift(name)
        found = reconcile_.compare(recomputed, stored.shift(name))
        for difference in found:
            click.echo(str(difference))
        differences += len(found)
        verdict = f"{len(found):,} differences" if found else "the ledger agrees"
        click.echo(f"shift {name}: {len(recomputed.rounds):,} rounds, {len(recomputed.bets):,} bet settlements: {verdict}", err=True)
    sys.exit(1 if differences else 0)
