"""``surveil up`` / ``surveil down``: the full local stack on this machine: Kafka, Redis and
Prometheus (ops/stack.sh), the four services, the console and a simulated floor playing live
into them.

Each service runs as its own principal (docs/security.md): its credentials come from the
stack's secrets (.stack/secrets/stack.env, written by ops/stack.sh), and it gets only its own.
Each simulated device has its own key, issued once into .stack/secrets/device-keys/: the
shoe-reader and the table-controller verify with it, the simulator (all the devices) signs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import click

from ..events.signing import console_device, shoe_device
from ..runtime.access import ANOMALY_DETECTION, CONSOLE, FLOOR_SIMULATOR, service_env
from ..runtime.alert_keys import PRIVATE_FILE, generate
from ..runtime.config import DEFAULT_METRICS_PORTS
from ..runtime.devices import KeyStore
from ..sim.floor import table_ids

ROOT = Path(__file__).resolve().parents[3]
STACK = ROOT / "ops" / "stack.sh"
RUN = ROOT / ".stack" / "run"  # pid and log files of what `up` started
STACK_ENV = ROOT / ".stack" / "secrets" / "stack.env"  # an admin's environment: every principal's password
SERVICES = ("shoe-reader", "table-controller", "settlement", "anomaly-detection", CONSOLE)
CONSOLE_USERS = ROOT / ".stack" / "console" / "users.json"  # the local console's users (0600)
DEVICE_KEYS = ROOT / ".stack" / "secrets" / "device-keys"  # the simulated devices' keys
ALERT_SIGNING = ROOT / ".stack" / "secrets" / "alert-signing"  # the detectors' key pair: verify with alert-signing.pub
# Who gets the device key store: the two that verify, and the simulator, which plays the devices.
WITH_DEVICE_KEYS = {"shoe-reader", "table-controller", FLOOR_SIMULATOR}


def _stack(command: str) -> None:
    if not STACK.exists():
        raise click.ClickException(f"{STACK} not found: `surveil up` runs from a checkout of the repository")
    subprocess.run(["bash", str(STACK), command], check=True)


def _operator_env() -> dict[str, str]:
    """This environment with the stack's: its addresses, the admin's credentials, every password."""
    env = dict(os.environ)
    for line in STACK_ENV.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            env[name] = value
    return env


def _start(name: str, args: list[str], principal: str) -> int:
    RUN.mkdir(parents=True, exist_ok=True)
    log = open(RUN / f"{name}.log", "ab")
    env = service_env(principal, _operator_env())  # its own credentials only
    if principal == CONSOLE:
        env.setdefault("CONSOLE_USERS_FILE", str(CONSOLE_USERS))
        env.setdefault("CONSOLE_EXPORT_DIR", str(CONSOLE_USERS.parent / "exports"))
    if principal in WITH_DEVICE_KEYS:
        env["DEVICE_KEYS"] = str(DEVICE_KEYS)
    if principal == ANOMALY_DETECTION:
        env["ALERT_SIGNING_KEY"] = str(ALERT_SIGNING / PRIVATE_FILE)
    process = subprocess.Popen(
        [sys.executable, "-m", "surveil", *args], stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
    )
    (RUN / f"{name}.pid").write_text(str(process.pid))
    return process.pid


def _running(name: str) -> bool:
    pid_file = RUN / f"{name}.pid"
    if not pid_file.exists():
        return False
    try:
        os.kill(int(pid_file.read_text()), 0)
        return True
    except (OSError, ValueError):
        return False


def _wait_for_metrics(port: int, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1):
                return True
        except OSError:
            time.sleep(0.5)
    return False


@click.command("up")
@click.option("--tables", type=click.IntRange(min=1), default=20, show_default=True, help="Simulated tables.")
@click.option("--shoes", type=click.IntRange(min=1), default=100, show_default=True, help="Shoes each table plays.")
@click.option("--pace", type=click.FloatRange(min=0), default=50.0, show_default=True, help="Seconds per round (50: real pace).")
@click.option("--inject", default="DRAW_BANKER_EXTRA,LATE_BET,CARD_MISMATCH", show_default=True, metavar="CODE[,CODE...]")
def up_command(tables: int, shoes: int, pace: float, inject: str) -> None:
    """Start Kafka, Redis, Prometheus, the four services, the console and a simulated floor."""
    _stack("up")
    store = KeyStore(DEVICE_KEYS)
    devices = [device(table) for table in table_ids(tables) for device in (shoe_device, console_device)]
    issued = [store.issue(device) for device in devices if store.get(device) is None]
    click.echo(f"device keys: {len(devices)} in {DEVICE_KEYS} ({len(issued)} issued now)")
    if not (ALERT_SIGNING / PRIVATE_FILE).exists():
        click.echo(f"alert-signing key {generate(ALERT_SIGNING)} made in {ALERT_SIGNING}")
    for service in SERVICES:
        if _running(service):
            click.echo(f"{service}: already running")
            continue
        pid = _start(service, ["serve", service], service)
        port = DEFAULT_METRICS_PORTS[service]
        ready = _wait_for_metrics(port)
        click.echo(f"{service}: pid {pid}, metrics http://127.0.0.1:{port}/metrics{'' if ready else ' (not answering yet: see its log)'}")
    if not _running("simulator"):
        args = ["simulate", "--live", "--tables", str(tables), "--shoes", str(shoes), "--pace", str(pace)]
        pid = _start("simulator", [*args, "--inject", inject] if inject else args, FLOOR_SIMULATOR)
        click.echo(f"simulator: pid {pid}, {tables} tables at {pace:g} s a round")
    console_port = os.environ.get("CONSOLE_PORT", "8088")
    users = (
        ""
        if CONSOLE_USERS.exists()
        else (f"\n  no users yet: CONSOLE_USERS_FILE={CONSOLE_USERS} surveil console users add NAME --role supervisor")
    )
    click.echo(
        f"\nConsole: http://127.0.0.1:{console_port}/{users}\n"
        f"Prometheus: http://127.0.0.1:9090 (alerts: /alerts, rules: /rules)\n"
        f"Logs: {RUN}/*.log\nAlerts as they happen: the console, and the topic baccarat.alerts "
        f"(a log of it proves itself: surveil verify LOG --key {ALERT_SIGNING}/alert-signing.pub)\n"
        "Grafana runs with docker compose (docs/deployment.md); here, query Prometheus directly.\n"
        "Stop everything: surveil down"
    )


@click.command("down")
def down_command() -> None:
    """Stop the simulated floor, the services and the local stack."""
    for name in ("simulator", *reversed(SERVICES)):
        pid_file = RUN / f"{name}.pid"
        if not _running(name):
            pid_file.unlink(missing_ok=True)
            continue
        pid = int(pid_file.read_text())
        os.killpg(pid, signal.SIGTERM)
        for _ in range(100):
            if not _running(name):
                break
            time.sleep(0.1)
        else:
            os.killpg(pid, signal.SIGKILL)
        pid_file.unlink(missing_ok=True)
        click.echo(f"{name}: stopped")
    _stack("down")
