"""``surveil keys``: the device keys (docs/security.md, "Device signatures") and the detectors'
alert-signing key ("Alert proof").

``surveil keys issue shoe/T07 console/T07`` makes a new random key for each device, writes it into
the key store (``--store``, default ``$DEVICE_KEYS``), and prints it, one ``<device> <key>`` a
line, for provisioning the device. Issuing a device's key again replaces it: a rotation.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..events.signing import check_device
from ..runtime.alert_keys import PRIVATE_FILE, PUBLIC_FILE, generate
from ..runtime.devices import RELOAD_SECONDS, STORE_ENV, KeyStore


def _store(store: Path | None) -> KeyStore:
    root = store or (Path(os.environ[STORE_ENV]) if os.environ.get(STORE_ENV) else None)
    if root is None:
        raise click.UsageError(f"no key store: --store DIR or {STORE_ENV}")
    return KeyStore(root)


def _device(ctx: click.Context, param: click.Parameter, devices: tuple[str, ...]) -> tuple[str, ...]:
    try:
        return tuple(check_device(device) for device in devices)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


@click.group("keys")
def keys() -> None:
    """Device keys: each card-reading shoe and each table's console has its own."""


@keys.command("issue")
@click.argument("devices", nargs=-1, required=True, callback=_device, metavar="DEVICE...")
@click.option("--store", type=click.Path(file_okay=False, path_type=Path), help=f"The key store directory (default ${STORE_ENV}).")
def issue(devices: tuple[str, ...], store: Path | None) -> None:
    """Issue a new key for each DEVICE (shoe/<table> or console/<table>), replacing any it had,
    and print it for the device: '<device> <64 hex digits>'."""
    key_store = _store(store)
    for device in devices:
        click.echo(f"{device} {key_store.issue(device).hex()}")
    click.echo(f"{len(devices)} keys in {key_store.root}; the verifiers take them within {RELOAD_SECONDS:g} s", err=True)


@keys.command("list")
@click.option("--store", type=click.Path(file_okay=False, path_type=Path), help=f"The key store directory (default ${STORE_ENV}).")
def list_devices(store: Path | None) -> None:
    """The devices with a key in the store (not the keys)."""
    for device in _store(store).devices():
        click.echo(device)


@keys.command("alert-signing")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="The directory for the key pair.")
def alert_signing(out: Path) -> None:
    """A new Ed25519 key pair for the detectors: OUT/alert-signing.key (anomaly-detection's
    ALERT_SIGNING_KEY, 0600) and OUT/alert-signing.pub (for `surveil verify --key`)."""
    try:
        identity = generate(out)
    except FileExistsError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"key {identity}: {out / PRIVATE_FILE} (private: anomaly-detection only), {out / PUBLIC_FILE} (public)")
