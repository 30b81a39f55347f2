"""``surveil simulate``: a simulated floor, recorded offline through the table side into an event
log with ground-truth labels, or played live to the shoe-reader and Kafka."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from pathlib import Path

import click
import msgspec
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..core.profiles import DEFAULT_PROFILE, profile_names
from ..embedded.record import labels_path, record_to_files
from ..events import models
from ..events.signing import DeviceKeys, console_device, shoe_device
from ..runtime.config import Settings
from ..runtime.devices import KeyStore
from ..runtime.kafka import Publisher
from ..shoe_reader.service import DEFAULT_PORT
from ..sim.floor import Floor
from ..sim.injections import INJECTABLE, SCOPES, InjectionError, Label, Scope, parse_codes
from ..sim.live import LiveRun, ShoeGateway, play_live


@click.command("simulate")
@click.option("--tables", type=click.IntRange(min=1), required=True, help="Tables on the floor.")
@click.option("--shoes", type=click.IntRange(min=1), required=True, help="Shoes played at each table.")
@click.option("--seed", type=int, default=0, show_default=True, help="The same seed plays the same floor.")
@click.option(
    "--profile", type=click.Choice(profile_names()), default=DEFAULT_PROFILE, show_default=True, help="House profile of every table."
)
@click.option(
    "--inject", "inject_text", default="", metavar="CODE[,CODE...]", help=f"Alert codes to put in, once each: {', '.join(INJECTABLE)}."
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Event log to write (.jsonl, or .jsonl.gz); labels go beside it. Live: the labels only.",
)
@click.option("--live", is_flag=True, help="Send the shoe lines to the shoe-reader and the inputs to Kafka instead.")
@click.option(
    "--kafka",
    default=lambda: os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"),
    show_default="$KAFKA_BOOTSTRAP or 127.0.0.1:9092",
    help="Live: the broker.",
)
@click.option(
    "--shoe-reader",
    "shoe_reader",
    default=f"127.0.0.1:{DEFAULT_PORT}",
    show_default=True,
    metavar="HOST:PORT",
    help="Live: the shoe-reader.",
)
@click.option(
    "--pace",
    type=click.FloatRange(min=0),
    default=50.0,
    show_default=True,
    help="Live: wall-clock seconds per round (0: as fast as possible).",
)
def simulate_command(
    tables: int,
    shoes: int,
    seed: int,
    profile: str,
    inject_text: str,
    out: Path | None,
    live: bool,
    kafka: str,
    shoe_reader: str,
    pace: float,
) -> None:
    """Play a simulated floor of baccarat tables, deterministically for a seed.

    Offline (the default), the tables' shoe lines and inputs go through the real shoe-reader parser,
    table-controller and settlement, and the events of the shoe, table and settlement topics are
    written to --out in publish order, with the ground-truth labels of the injections in
    <out>.labels.jsonl.
    """
    err = Console(stderr=True)
    try:
        codes = parse_codes(inject_text)
        if live and any(SCOPES[code] is Scope.SETTLEMENT for code in codes):
            raise InjectionError("settlement injections change the settlement service's output: offline only")
        floor = Floor(tables, shoes, seed, profile, codes)
    except InjectionError as error:
        raise click.UsageError(str(error)) from None
    if live:
        run = _live(floor, kafka, shoe_reader, pace, out, err)
        err.print(
            f"sent {run.lines} shoe lines and {run.inputs} inputs; {run.labels} labels; {run.reconnects} reconnects "
            f"to the shoe-reader; at worst {run.most_behind:.1f} s behind the pace"
        )
    else:
        if out is None:
            raise click.UsageError("--out is required (offline, the event log is the output)")
        _offline(floor, out, tables * shoes, err)
    missing = floor.unapplied()
    if missing:
        err.print(
            "[red]not injected (the run ended first; play more shoes):[/red] " + ", ".join(f"{code} at {table}" for table, code in missing)
        )
        sys.exit(1)


def _progress(err: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err)


def _offline(floor: Floor, out: Path, total_shoes: int, err: Console) -> None:
    with _progress(err) as progress:
        task = progress.add_task("shoes played", total=total_shoes)

        def on_event(event: models.Event) -> None:
            if isinstance(event, models.ShoeEnded):
                progress.advance(task)

        recording = record_to_files(floor, out, on_event)
    rounds = recording.events["baccarat.round.completed"] + recording.events["baccarat.round.voided"]
    err.print(f"{sum(recording.events.values())} events, {rounds} rounds -> {out}; {recording.labels} labels -> {labels_path(out)}")
    if recording.dead_letters:  # the simulated devices never send what the table side refuses
        err.print(f"[red]{len(recording.dead_letters)} inputs were rejected, first: {recording.dead_letters[0].reason}[/red]")
        sys.exit(1)


def _device_keys(floor: Floor, err: Console) -> DeviceKeys | None:
    """The simulated devices' own keys, from the key store ``DEVICE_KEYS`` (the simulator plays
    every device of the floor, so it holds each one's key); None without a store."""
    store = os.environ.get("DEVICE_KEYS")
    if not store:
        err.print("[yellow]DEVICE_KEYS is not set: the devices sign nothing, which only services with DEVICE_SIGNATURES=off take[/yellow]")
        return None
    keys = KeyStore(store)
    devices = [device(table.table_id) for table in floor.tables for device in (shoe_device, console_device)]
    missing = [device for device in devices if keys.get(device) is None]
    if missing:
        raise click.UsageError(f"no key in {store} for {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}: surveil keys issue")
    return DeviceKeys(keys)


def _live(floor: Floor, kafka: str, shoe_reader: str, pace: float, out: Path | None, err: Console) -> LiveRun:
    host, _, port = shoe_reader.rpartition(":")
    settings = dataclasses.replace(Settings.from_env("floor-simulator"), kafka_bootstrap=kafka)
    keys = _device_keys(floor, err)
    publisher = Publisher(settings, keys)
    labels = open(labels_path(out), "wb") if out is not None else None

    def on_label(label: Label) -> None:
        if labels is not None:
            labels.write(msgspec.json.encode(label) + b"\n")

    async def play() -> LiveRun:
        gateway = ShoeGateway(host or "127.0.0.1", int(port))
        try:
            with _progress(err) as progress:
                task = progress.add_task("inputs sent", total=None)
                return await play_live(
                    floor, publisher, gateway, pace, on_label, lambda run: progress.update(task, completed=run.inputs), keys=keys
                )
        finally:
            await gateway.close()

    try:
        return asyncio.run(play())
    finally:
        publisher.close()
        if labels is not None:
            labels.close()
