"""Encoding and decoding of contract events: bytes in, a validated typed event out, or a clear error."""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar, Union

import msgspec

from . import models
from .models import Data, Event

EVENT_TYPES: dict[str, type[Event]] = {
    cls.__struct_config__.tag: cls  # type: ignore[misc]
    for cls in Event.__subclasses__()
}
AnyEvent = Union[tuple(EVENT_TYPES.values())]  # type: ignore[valid-type]  # noqa: UP007 (a union built at run time)
TOPICS: tuple[str, ...] = tuple(dict.fromkeys(cls.topic for cls in EVENT_TYPES.values()))

_decoder = msgspec.json.Decoder(AnyEvent)
_encoder = msgspec.json.Encoder()

E = TypeVar("E", bound=Event)


class InvalidEventError(ValueError):
    """Bytes that are not a contract event; the message names the field at fault."""


def decode(raw: bytes | str) -> Event:
    """The typed event in ``raw`` (one CloudEvents JSON object).

    >>> decode(b'{"type": "baccarat.bets.closed"}')
    Traceback (most recent call last):
    ...
    surveil.events.codec.InvalidEventError: Object missing required field `specversion`
    """
    try:
        event: Event = _decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError) as error:
        raise InvalidEventError(str(error)) from None
    except RecursionError:  # msgspec's for JSON nested deeper than it recurses: no event is
        raise InvalidEventError("JSON nested too deeply to be an event") from None
    return event


def encode(event: Event) -> bytes:
    return _encoder.encode(event)


def make(cls: type[E], data: Data | msgspec.Struct, *, id: str, source: str, time: datetime, subject: str | None = None) -> E:
    """A new event of type ``cls``; ``subject`` is the table id, as the contract fixes (given only
    for an event about no one table: a checkpoint is about a partition of the alerts topic)."""
    return cls(  # type: ignore[call-arg]
        specversion="1.0",
        id=id,
        source=source,
        time=time,
        subject=data.table_id if subject is None else subject,  # type: ignore[union-attr]
        datacontenttype="application/json",
        data=data,
    )


__all__ = ["EVENT_TYPES", "AnyEvent", "InvalidEventError", "TOPICS", "decode", "encode", "make", "models"]
