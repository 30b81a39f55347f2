"""``surveil``: the command line of the surveillance system.

Commands are imported when they run, so a service process loads (and exports the metrics of)
only its own code.
"""

from __future__ import annotations

import importlib

import click

from .. import version

# Each service's entry point; `surveil serve NAME` runs one.
SERVICES = {
    "shoe-reader": "surveil.shoe_reader.service",
    "table-controller": "surveil.table_controller.service",
    "settlement": "surveil.settlement.service",
    "anomaly-detection": "surveil.anomaly_detection.service",
    "lag-exporter": "surveil.runtime.lag_exporter",
    "console": "surveil.console.service",
}

# command name -> "module:attribute" of its click command
COMMANDS = {
    "demo": "surveil.demo:demo_command",
    "simulate": "surveil.cli.simulate:simulate_command",
    "replay": "surveil.cli.replay:replay_command",
    "verify": "surveil.analysis.verify:verify_command",
    "export": "surveil.cli.export:export_command",
    "keys": "surveil.cli.keys:keys",
    "ledger": "surveil.cli.ledger:ledger",
    "reconcile": "surveil.cli.ledger:reconcile",
    "up": "surveil.cli.stack:up_command",
    "down": "surveil.cli.stack:down_command",
    "console": "surveil.console.commands:console_command",
}


class _Commands(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*COMMANDS, *super().list_commands(ctx)])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in COMMANDS:
            module, attribute = COMMANDS[name].split(":")
            command: click.Command = getattr(importlib.import_module(module), attribute)
            return command
        return super().get_command(ctx, name)


@click.group(cls=_Commands)
@click.version_option(version(), "--version", prog_name="surveil", message="%(prog)s %(version)s")
def main() -> None:
    """Surveillance of Macau baccarat tables: every round replayed against the rules."""


@main.command()
@click.argument("service", type=click.Choice(sorted(SERVICES)))
def serve(service: str) -> None:
    """Run one service against Kafka and Redis (configured by environment variables)."""
    importlib.import_module(SERVICES[service]).main()
