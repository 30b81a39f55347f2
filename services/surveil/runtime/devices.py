"""Signed device records on the Kafka runner (the table-controller's ``baccarat.inputs``): each
must carry its device's signature (``events.signing``), be about the device's own table, and
carry a counter above the last one taken from the device. The last counter per device is kept
with the processor's state, committed with the batch that took it, so a message replayed after a
restart is refused as surely as one replayed a second later. A refusal is a dead letter of kind
``signature``, which the detectors raise as ``DEVICE_SIGNATURE``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import structlog

from ..events.codec import InvalidEventError
from ..events.models import Event
from ..events.signing import HEADER, SIGNED_TOPICS, STORE_ENV, DeviceKeys, KeyStore, Refused, device_table
from . import metrics
from .state import State


def keys_from_env(service: str, kinds: Iterable[str]) -> DeviceKeys | None:
    """A verifying service's device keys (``DeviceKeys.from_env``: it does not start without
    them unless told they are off), said in its log and its gauge."""
    keys = DeviceKeys.from_env(kinds)
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
