"""Device signatures: every shoe line and every console or sensor input carries an HMAC-SHA256
under its own device's key, so a spoofed card read or bet is refused (and alerted on).

Each device has a key of its own, 32 random bytes that an operator issues for it
(``surveil keys issue shoe/T07``) into the key store, a directory only the verifying services
read (``DEVICE_KEYS``; ``runtime.devices.KeyStore``): ``<store>/shoe/<table>.key`` for a table's card-reading shoe,
``<store>/console/<table>.key`` for its dealer console and bet sensors, each 64 hex digits. The
device is provisioned with its key and nothing else; no secret derives one key from another.
The shoe-reader reads only ``shoe/``, the table-controller only ``console/``.

A key signs for its own table only, and for each message once:

- a shoe line names its table and its sequence number, both under the signature
  (``shoe_protocol``); the shoe-reader refuses a number it has acknowledged before;
- an input's record key is its table, and its ``signature`` header is ``<counter>:<hmac>``,
  the HMAC of the counter and the record's value: the table-controller refuses an input whose
  event is about another table, or whose counter is not above the last it took from the device.

This module signs and checks over any ``KeyLookup``; where the keys come from is not its
business. The verifiers refuse to start without a key store unless ``DEVICE_SIGNATURES=off`` is
set, for a development floor whose devices sign nothing (``runtime.devices``); they say so in
their log and in the gauge ``surveil_device_signatures_enforced`` (docs/security.md).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
import time
from collections.abc import Mapping
from typing import Protocol

from . import topics

HEADER = "signature"  # the Kafka record header of a signed input: "<counter>:<hmac hex>"
KINDS = ("shoe", "console")

_TABLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,31}")  # a table id, as the shoe protocol has it
_SIGNATURE = re.compile(rb"([1-9][0-9]{0,18}):([0-9a-f]{64})")


def shoe_device(table_id: str) -> str:
    return f"shoe/{table_id}"


def console_device(table_id: str) -> str:
    return f"console/{table_id}"


# Topics whose records devices write, signed in the record header: the device, by the record key.
SIGNED_TOPICS = {topics.INPUTS: console_device}


def device_table(device: str) -> str:
    """The table a device name (``shoe/T07``) belongs to."""
    return device.partition("/")[2]


def check_device(device: str) -> str:
    """``device`` if it is ``shoe/<table>`` or ``console/<table>``; ValueError otherwise."""
    kind, _, table = device.partition("/")
    if kind not in KINDS or not _TABLE.fullmatch(table):
        raise ValueError(f"{device!r} is not a device: shoe/<table> or console/<table>, the table 1-32 of A-Z a-z 0-9 . _ -")
    return device


class KeyLookup(Protocol):
    """Where a device's key is found: None for a device without one."""

    def get(self, device: str, /) -> bytes | None: ...


class Refused(ValueError):
    """A device message its device's key does not vouch for; the message says why."""


class DeviceKeys:
    """Signs as the devices (the simulator, a device gateway: ``keys`` holds their own keys) and
    checks what they sent (a verifier: ``keys`` is its part of the key store)."""

    def __init__(self, keys: KeyLookup | Mapping[str, bytes]) -> None:
        self.keys = keys
        self._counters: dict[str, int] = {}
        self._lock = threading.Lock()

    def key(self, device: str) -> bytes:
        key = self.keys.get(device)
        if key is None:
            raise Refused(f"no key is issued for {device}: a device of no table this floor knows")
        return key

    def sign(self, device: str, payload: bytes) -> str:
        return hmac.new(self.key(device), payload, hashlib.sha256).hexdigest()

    def problem(self, device: str, payload: bytes, signature: str | None) -> str | None:
        """Why ``signature`` does not prove ``payload`` came from ``device``; None when it does."""
        if not signature:
            return f"no signature: every message of {device} must be signed"
        try:
            expected = self.sign(device, payload)
        except Refused as refused:
            return str(refused)
        if not hmac.compare_digest(signature.encode("ascii", "replace"), expected.encode()):
            return f"the signature is not {device}'s: a spoofed or altered message"
        return None

    # ---- signed Kafka records (the inputs): a counter under the signature ------------------------

    def header(self, device: str, payload: bytes) -> bytes:
        """The ``signature`` header of a record ``device`` sends now: its next counter (above every
        one it sent before, in this process or an earlier one: microseconds since 1970 at least)
        and the HMAC of the counter and ``payload``."""
        with self._lock:
            counter = max(self._counters.get(device, 0) + 1, time.time_ns() // 1000)
            self._counters[device] = counter
        return b"%d:%s" % (counter, self._mac(device, counter, payload).encode())

    def counter(self, device: str, payload: bytes, header: bytes | None) -> int:
        """The counter of a record ``device`` signed (``header``), if its key vouches for the
        record; ``Refused`` otherwise. Whether the counter is new is the caller's to judge."""
        found = _SIGNATURE.fullmatch(header) if isinstance(header, bytes) else None
        if found is None:
            reason = "no signature" if not header else "a signature that is not <counter>:<64 hex digits>"
            raise Refused(f"{reason}: every message of {device} must be signed")
        counter = int(found[1])
        if not hmac.compare_digest(found[2], self._mac(device, counter, payload).encode()):
            raise Refused(f"the signature is not {device}'s: a spoofed or altered message")
        return counter

    def _mac(self, device: str, counter: int, payload: bytes) -> str:
        return hmac.new(self.key(device), b"%d\n" % counter + payload, hashlib.sha256).hexdigest()
