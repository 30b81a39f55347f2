"""``surveil export``: a time window of the live topics into a replayable log, with its manifest."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..analysis.export import ExportError, export_log, manifest_path
from ..runtime.config import Settings


class _Time(click.ParamType):
    """An ISO 8601 / RFC 3339 time with its time zone (``2025-03-01T20:00:00+08:00``, ``...Z``)."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            self.fail(f"{value!r} is not an ISO 8601 time, e.g. 2025-03-01T20:00:00+08:00", param, ctx)
        if moment.tzinfo is None:
            self.fail(f"{value!r} has no time zone: add one, e.g. +08:00 (Macau) or Z (UTC)", param, ctx)
        return moment


@click.command("export")
@click.option("--from", "start", type=_Time(), required=True, help="The window's start: records that reached the topics from then.")
@click.option("--to", "end", type=_Time(), required=True, help="The window's end (excluded).")
@click.option("--tables", help="Only these tables, comma-separated (T01,T07); default: every table.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    required=True,
    help="The log to write (.jsonl.gz, or .jsonl); its manifest goes beside it (.manifest.json).",
)
def export_command(start: datetime, end: datetime, tables: str | None, out: Path) -> None:
    """Export the shoe, table and settlement topics between two times into a recorded log that
    `surveil replay` reads, with a manifest (sha256, event counts, topic offsets, software).

    Reads the broker of KAFKA_BOOTSTRAP as KAFKA_USERNAME: a principal that may read the three
    topics (auditor, or admin)."""
    if end <= start:
        raise click.BadParameter("--to must come after --from", param_hint="--to")
    wanted = [table.strip() for table in tables.split(",") if table.strip()] if tables else None
    console = Console(stderr=True)
    columns = (TextColumn("exporting {task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("offsets"), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(out.name, total=None)
        try:
            manifest = export_log(
                Settings.from_env("export"),
                start,
                end,
                wanted,
                out,
                progress=lambda done, total: progress.update(task, completed=done, total=total),
            )
        except ExportError as error:
            raise click.ClickException(str(error)) from None
    by_type = ", ".join(f"{count:,} {name}" for name, count in manifest.events_by_type.items()) or "none"
    console.print(f"{manifest.events:,} events of {len(manifest.tables_found)} tables -> {out} (sha256 {manifest.sha256})")
    console.print(f"  {by_type}")
    console.print(f"  manifest -> {manifest_path(out)}")
    if manifest.refused_count:
        console.print(f"  {manifest.refused_count:,} records left out, as the live detectors refused them (listed in the manifest)")
    for warning in manifest.warnings:
        console.print(f"  [yellow]warning[/]: {warning}")
