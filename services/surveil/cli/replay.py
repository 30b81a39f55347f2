"""``surveil replay``: a recorded event log through the detectors, offline (the embedded default)."""

from __future__ import annotations

import dataclasses
import gzip
import os
import time
from collections.abc import Iterator
from io import BufferedIOBase
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from ..analysis import report
from ..analysis.incident import IncidentCollector
from ..analysis.replay import replay
from ..events import codec
from ..events.models import AlertRaised
from ..runtime.alert_keys import AlertSigner

# One per core, to four: every worker reads every line, and this process judges every finding in
# turn (a sixth of a replay's work), so more workers would add little (not measured past two cores).
DEFAULT_WORKERS = min(os.cpu_count() or 1, 4)


def _lines_with_progress(path: Path, progress: Progress) -> Iterator[bytes]:
    """The log's lines, advancing ``progress`` by the bytes read from disk (gzip or not)."""
    raw = open(path, "rb")
    gzipped = raw.read(2) == b"\x1f\x8b"
    raw.seek(0)
    task = progress.add_task(path.name, total=path.stat().st_size)
    stream: BufferedIOBase = gzip.open(raw) if gzipped else raw
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
@click.option(
    "--report",
    "report_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the incident report here: one self-contained HTML page.",
)
@click.option("--kafka", metavar="BOOTSTRAP", help="Publish the log into the topics of this broker instead, for the live services.")
@click.option(
    "--speed", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True, help="With --kafka: times the original pace."
)
@click.option("--max", "as_fast", is_flag=True, help="With --kafka: as fast as the broker takes it.")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=DEFAULT_WORKERS,
    show_default=True,
    envvar="REPLAY_WORKERS",
    help="Processes watching the tables (each table in one); the alerts are the same for any number.",
)
def replay_command(
    log: Path,
    profile: str | None,
    alerts_file: Path | None,
    report_file: Path | None,
    kafka: str | None,
    speed: float,
    as_fast: bool,
    workers: int,
) -> None:
    """Replay a recorded event log (.jsonl or .jsonl.gz) through the detectors and report, or
    with --kafka publish it into the live pipeline's topics."""
    console = Console(stderr=True)
    if kafka:
        if alerts_file or report_file or profile:
            raise click.UsageError("--alerts, --report and --profile judge the log here; --kafka hands it to the live services")
        _publish(log, kafka, None if as_fast else speed, console)
        return
    out = open(alerts_file, "wb") if alerts_file else None
    signer = AlertSigner.from_env()  # with the detectors' key (ALERT_SIGNING_KEY), a log `surveil verify` proves
    incidents = IncidentCollector(log.name, profile) if report_file else None

    def write(alert: AlertRaised) -> None:
        if out:
            out.write(codec.encode(alert) + b"\n")
        if incidents is not None:
            incidents.alert(alert)

    started = time.perf_counter()
    columns = (TextColumn("replaying {task.description}"), BarColumn(), TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        result = replay(
            _lines_with_progress(log, progress),
            profile=profile,
            on_alert=write,
            on_event=incidents.event if incidents is not None else None,
            workers=workers,
            signer=signer,
        )
    if out:
        if result.checkpoint is not None:
            out.write(codec.encode(result.checkpoint) + b"\n")
        out.close()
    if incidents is not None and report_file:
        from ..analysis.incident_page import sha256_of

        digest = sha256_of(log) if log.is_file() else None  # the file as given (compressed or not)
        report_file.write_text(incidents.render(result, digest), encoding="utf-8")
    Console().print(report.render(result, time.perf_counter() - started))


def _publish(log: Path, bootstrap: str, speed: float | None, console: Console) -> None:
    from ..analysis.publish import publish_log
    from ..analysis.replay import BadLine
    from ..runtime.config import Settings
    from ..runtime.kafka import Publisher

    publisher = Publisher(dataclasses.replace(Settings.from_env("replay"), kafka_bootstrap=bootstrap))
    bad: list[BadLine] = []
    columns = (TextColumn("publishing {task.description}"), BarColumn(), TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        count = publish_log(_lines_with_progress(log, progress), publisher, speed, bad.append)
    publisher.close()
    console.print(f"published {count:,} events to {bootstrap}; {len(bad)} malformed lines skipped")
    for line in bad[:10]:
        console.print(f"  line {line.number}: {line.reason}")
