"""The dead-letter record: the rejected bytes, where they came from and why (docs/contract.md).

A dead letter fits in one record of the broker whatever it refuses: the payload is kept whole
when its base64 fits under ``LETTER_BYTES``, else as much of its start as fits, with the whole's
size and SHA-256; the reason, key and origin are cut to their bounds. A dead letter too large to
publish would stop its service (a runner retries its outbox until the broker takes it).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Annotated

import msgspec

from .topics import MAX_RECORD_BYTES, RECORD_FRAMING

# Why, in a word: the detectors alert on "signature" (a spoofed device message is an attack).
INVALID = "invalid"  # not the contract, or not the protocol
REJECTED = "rejected"  # valid, but the service cannot use it (an unknown round, ...)
SIGNATURE = "signature"  # a device message without its device's signature
INTERNAL = "internal"  # the service failed on it (a bug)

KEY_LIMIT = 256  # characters of the refused record's key in the letter; bytes of the letter's record key
TEXT_CHARS = 2000  # of the reason, the origin and the service's name
# The largest encoded letter: the rest of its record is its key and framing.
LETTER_BYTES = MAX_RECORD_BYTES - RECORD_FRAMING - KEY_LIMIT

Text = Annotated[str, msgspec.Meta(max_length=TEXT_CHARS)]


class DeadLetter(msgspec.Struct, frozen=True, kw_only=True):
    service: Text  # who rejected it
    origin: Text  # a topic, or a device such as "tcp://10.0.0.7:40112"
    kind: Text = INVALID
    topic: Text | None = None
    partition: int | None = None
    offset: int | None = None
    key: Annotated[str, msgspec.Meta(max_length=KEY_LIMIT)] | None = None
    reason: Text
    # The refused bytes (base64 in JSON), or their start when the whole does not fit.
    payload: bytes = msgspec.field(name="payload_b64")
    payload_bytes: int | None = None  # the size of the whole (absent in letters before v1.2)
    payload_sha256: str | None = None  # the SHA-256 of the whole, in hex
    time: datetime

    @property
    def complete(self) -> bool:
        """Whether ``payload`` is the whole of what was refused."""
        return self.payload_bytes is None or len(self.payload) == self.payload_bytes


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
    letter = DeadLetter(
        service=_cut(service),
        origin=_cut(origin),
        kind=kind,
        topic=topic,
        partition=partition,
        offset=offset,
        key=None if key is None else key[:KEY_LIMIT],
        reason=_cut(reason),
        payload=b"",
        payload_bytes=len(payload),
        payload_sha256=hashlib.sha256(payload).hexdigest(),
        time=datetime.now(UTC),
    )
    room = (LETTER_BYTES - len(encode(letter))) // 4 * 3  # payload bytes whose base64 fits
    return msgspec.structs.replace(letter, payload=payload if len(payload) <= room else payload[:room])


def record_key(key: bytes | None) -> bytes:
    """The record key of the dead letter of a record keyed ``key``: the same, up to ``KEY_LIMIT``."""
    return (key or b"")[:KEY_LIMIT]


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


encode = msgspec.json.Encoder().encode
_decoder = msgspec.json.Decoder(DeadLetter)


def decode(raw: bytes) -> DeadLetter:
    """The dead letter in ``raw``; ``msgspec.DecodeError`` for anything else, however it is nested."""
    try:
        return _decoder.decode(raw)
    except RecursionError:
        raise msgspec.DecodeError("JSON nested too deeply to be a dead letter") from None
