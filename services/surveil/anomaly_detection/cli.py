"""``surveil replay``: a recorded event log through the detectors, offline (the embedded default)."""

from __future__ import annotations

import gzip
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from ..events import codec
from ..events.models import AlertRaised
from . import report
from .replay import replay


def _lines_with_progress(path: Path, progress: Progress) -> Iterator[bytes]:
    """The log's lines, advancing ``progress`` by the bytes read from disk (gzip or not)."""
    raw = open(path, "rb")
    gzipped = raw.read(2) == b"\x1f\x8b"
    raw.seek(0)
    task = progress.add_task(path.name, total=path.stat().st_size)
    stream: IO[bytes] = gzip.open(raw) if gzipped else raw
    with raw, stream:
        for number, line in enumerate(stream):
            if number % 4096 == 0:
                progress.update(task, completed=raw.tell())
            yield line
    progress.update(task, completed=path.stat().st_size)


@click.command("replay")
@click.argument("log", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--profile", help="House profile to judge by, overriding the one each round.opened names.")
@click.option("--alerts", "alerts_file", type=click.Path(dir_okay=False, path_type=Path), help="Write the alert events here as JSONL.")
def replay_command(log: Path, profile: str | None, alerts_file: Path | None) -> None:
    """Replay a recorded event log (.jsonl or .jsonl.gz) through the detectors and report."""
    console = Console(stderr=True)
    out = open(alerts_file, "wb") if alerts_file else None

    def write(alert: AlertRaised) -> None:
        if out:
            out.write(codec.encode(alert) + b"\n")

    started = time.perf_counter()
    columns = (TextColumn("replaying {task.description}"), BarColumn(), TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        result = replay(_lines_with_progress(log, progress), profile=profile, on_alert=write)
    if out:
        out.close()
    Console().print(report.render(result, time.perf_counter() - started))
