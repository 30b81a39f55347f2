"""``surveil``: the command line of the surveillance system."""

from __future__ import annotations

import importlib

import click

# Each service's entry point; `surveil serve NAME` runs one.
SERVICES = {
    "shoe-reader": "surveil.shoe_reader.service",
    "table-controller": "surveil.table_controller.service",
    "settlement": "surveil.settlement.service",
    "anomaly-detection": "surveil.anomaly_detection.service",
    "lag-exporter": "surveil.runtime.lag_exporter",
}


@click.group()
def main() -> None:
    """Surveillance of Macau baccarat tables: every round replayed against the rules."""


@main.command()
@click.argument("service", type=click.Choice(sorted(SERVICES)))
def serve(service: str) -> None:
    """Run one service against Kafka and Redis (configured by environment variables)."""
    importlib.import_module(SERVICES[service]).main()


from .anomaly_detection.cli import replay_command  # noqa: E402

main.add_command(replay_command)

from .settlement.cli import ledger, reconcile  # noqa: E402

main.add_command(ledger)
main.add_command(reconcile)
main.add_command(importlib.import_module("surveil.sim.cli").simulate_command)

from .demo import demo_command  # noqa: E402

main.add_command(demo_command)

from .stack import down_command, up_command  # noqa: E402

main.add_command(up_command)
main.add_command(down_command)
