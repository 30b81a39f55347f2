"""The device keys' store, and signed device records on the Kafka runner.

The key store is a directory (``DEVICE_KEYS``) of one key file per device, issued by ``surveil
keys issue`` (``KeyStore``); a verifying service reads its kinds of keys from it
(``keys_from_env``) and checks with them (``events.signing``).

Signed device records on the Kafka runner (the table-controller's ``baccarat.inputs``): each
must carry its device's signature (``events.signing``), be about the device's own table, and
carry a counter above the last one taken from the device. The last counter per device is kept
with the processor's state, committed with the batch that took it, so a message replayed after a
restart is refused as surely as one replayed a second later. A refusal is a dead letter of kind
``signature``, which the detectors raise as ``DEVICE_SIGNATURE``.
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import structlog

from ..events.codec import InvalidEventError
from ..events.models import Event
from ..events.signing import HEADER, KINDS, SIGNED_TOPICS, DeviceKeys, Refused, check_device, device_table
from . import metrics
from .state import State

STORE_ENV = "DEVICE_KEYS"  # the key store: a directory of device keys
SWITCH_ENV = "DEVICE_SIGNATURES"  # "off": no signature is checked (a development floor)
RELOAD_SECONDS = 1.0  # how often a verifier looks whether the store changed (a key issued or replaced)

_HEX_KEY = re.compile(r"[0-9a-f]{64}")


class KeyStore:
    """The key store directory. A verifier reads a device's key when it first needs it and again
    once the directory changed (a key issued or replaced: rotation needs no restart); a device
    without a key is looked for again only then, so unknown devices cost no file reads."""

    def __init__(self, root: Path | str, kinds: Iterable[str] = KINDS) -> None:
        self.root = Path(root)
        self.kinds = tuple(kinds)
        self._keys: dict[str, bytes | None] = {}
        self._seen: dict[str, int | None] = {}  # kind -> its directory's mtime when last read
        self._checked = 0.0
        self._lock = threading.Lock()

    def path(self, device: str) -> Path:
        kind, _, table = check_device(device).partition("/")
        return self.root / kind / f"{table}.key"

    def get(self, device: str) -> bytes | None:
        try:
            kind = check_device(device).partition("/")[0]
        except ValueError:
            return None
        if kind not in self.kinds:
            return None
        with self._lock:
            now = time.monotonic()
            if now - self._checked >= RELOAD_SECONDS:
                self._checked = now
                self._forget_changed()
            if device not in self._keys:
                self._keys[device] = self._read(device)
            return self._keys[device]

    def _forget_changed(self) -> None:
        for kind in self.kinds:
            try:
                mtime: int | None = (self.root / kind).stat().st_mtime_ns
            except FileNotFoundError:
                mtime = None
            if self._seen.get(kind, -1) != mtime:
                self._seen[kind] = mtime
                self._keys = {device: key for device, key in self._keys.items() if not device.startswith(kind + "/")}

    def _read(self, device: str) -> bytes | None:
        try:
            text = self.path(device).read_text(encoding="ascii").strip()
        except (FileNotFoundError, UnicodeDecodeError):
            return None
        return bytes.fromhex(text) if _HEX_KEY.fullmatch(text) else None

    def issue(self, device: str) -> bytes:
        """A new random key for ``device``, written into the store (replacing its old one: from
        then on only the new one verifies). Directories ``0700``, files ``0600``."""
        path = self.path(device)
        key = secrets.token_bytes(32)
        old = os.umask(0o077)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".issue-")
            with os.fdopen(fd, "w", encoding="ascii") as file:
                file.write(key.hex() + "\n")
            os.replace(temporary, path)
        finally:
            os.umask(old)
        with self._lock:
            self._keys[device] = key
        return key

    def devices(self) -> list[str]:
        """Every device with a key in the store."""
        return sorted(f"{kind}/{path.stem}" for kind in self.kinds for path in (self.root / kind).glob("*.key"))


def verifier_keys(kinds: Iterable[str], env: Mapping[str, str] = os.environ) -> DeviceKeys | None:
    """A verifier's keys, from the store ``DEVICE_KEYS`` names (only ``kinds``); None when
    ``DEVICE_SIGNATURES=off``. Raises ``SystemExit`` (the service does not start) without a store."""
    switch = env.get("DEVICE_SIGNATURES", "on")
    if switch == "off":
        return None
    if switch != "on":
        raise SystemExit(f"{SWITCH_ENV}={switch!r}: 'on' (the default) or 'off'")
    store = env.get("DEVICE_KEYS", "")
    if not store or not Path(store).is_dir():
        raise SystemExit(
            f"refusing to start without device keys: {STORE_ENV} must name the key store directory "
            f"(now {store!r}; `surveil keys issue` fills it), or {SWITCH_ENV}=off must say that no device signs"
        )
    return DeviceKeys(KeyStore(store, kinds))


def keys_from_env(service: str, kinds: Iterable[str]) -> DeviceKeys | None:
    """A verifying service's device keys (``verifier_keys``: it does not start without them
    unless told they are off), said in its log and its gauge."""
    keys = verifier_keys(kinds)
    metrics.DEVICE_SIGNATURES.labels(service).set(0 if keys is None else 1)
    log = structlog.get_logger().bind(service=service)
    if keys is None:
        log.warning("device signatures are off (DEVICE_SIGNATURES=off): every device message is taken unchecked, forged or not")
    elif isinstance(keys.keys, KeyStore):
        log.info("device signatures checked", key_store=str(keys.keys.root), devices=len(keys.keys.devices()), store_variable=STORE_ENV)
    return keys


def _device(topic: str, record: Any) -> str | None:
    device_of = SIGNED_TOPICS.get(topic)
    return None if device_of is None else device_of((record.key or b"").decode(errors="replace"))


class DeviceRecords:
    def __init__(self, keys: DeviceKeys) -> None:
        self.keys = keys

    def prefetch(self, records: Iterable[tuple[str, Any]], state: State) -> None:
        """Read the last counters of the devices of ``records`` ((topic, record) pairs) in one round trip."""
        devices = {device for topic, record in records if (device := _device(topic, record)) is not None}
        state.prefetch(*(state.key("device", device) for device in devices))

    def refusal(self, topic: str, record: Any, event: Event | InvalidEventError, state: State) -> str | None:
        """Why the record of ``topic`` (``event``, decoded from it) is not its device's to send
        now; None when it is, or ``topic`` is not a device's. Takes its counter when it is."""
        device = _device(topic, record)
        if device is None:
            return None
        headers = [value for name, value in record.headers or () if name == HEADER]
        try:
            counter = self.keys.counter(device, record.value or b"", headers[0] if len(headers) == 1 else None)
        except Refused as refused:
            return str(refused)
        table = device_table(device)
        if isinstance(event, Event) and {event.subject, event.data.table_id} != {table}:  # type: ignore[attr-defined]
            return f"{device} signed an event of table {event.subject}: a key signs for its own table only"
        key = state.key("device", device)
        last = state.get(key, int) or 0
        if counter <= last:
            return f"a replayed or out-of-order message: counter {counter} of {device} is not above the last one taken, {last}"
        state.put(key, counter)
        return None
