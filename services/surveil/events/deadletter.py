"""The dead-letter record: the rejected bytes, where they came from and why (docs/contract.md)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import msgspec

# Why, in a word: the detectors alert on "signature" (a spoofed device message is an attack).
INVALID = "invalid"  # not the contract, or not the protocol
REJECTED = "rejected"  # valid, but the service cannot use it (an unknown round, ...)
SIGNATURE = "signature"  # a device message without its device's signature
INTERNAL = "internal"  # the service failed on it (a bug)


class DeadLetter(msgspec.Struct, frozen=True, kw_only=True):
    service: str  # who rejected it
    origin: str  # a topic, or a device such as "tcp://10.0.0.7:40112"
    kind: str = INVALID
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    key: str | None = None
    reason: str
    payload_b64: str
    time: datetime

    @property
    def payload(self) -> bytes:
        return base64.b64decode(self.payload_b64)


def dead_letter(
    service: str,
    payload: bytes,
    reason: str,
    *,
    origin: str,
    topic: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
    key: str | None = None,
    kind: str = INVALID,
) -> DeadLetter:
    return DeadLetter(
        service=service,
        origin=origin,
        kind=kind,
        topic=topic,
        partition=partition,
        offset=offset,
        key=key,
        reason=reason,
        payload_b64=base64.b64encode(payload).decode(),
        time=datetime.now(UTC),
    )


encode = msgspec.json.Encoder().encode
decode = msgspec.json.Decoder(DeadLetter).decode
