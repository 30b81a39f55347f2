"""What a service is to the runtime: a processor that turns each input event into output events.

The same processor runs on the Kafka runner (live) and on the in-process bus (demo, offline
replay, tests). It keeps its state only in the ``State`` it is given, so either runner can make
that state durable or not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Protocol

from ..events.models import Event
from .state import State


class Rejected(Exception):
    """An input the processor cannot use; it goes to the dead-letter topic with this reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Processor(Protocol):
    """A processor may also define ``prefetch(events, state)``: the Kafka runner calls it with a
    batch's events before it processes them, so that it can read the state they need in one
    round trip (``State.prefetch``) instead of one per event."""

    name: ClassVar[str]  # the service name, also its consumer group and state namespace
    consumes: ClassVar[tuple[str, ...]]  # topics

    def process(self, event: Event, state: State) -> Sequence[Event]:
        """The events to publish for ``event``; raise ``Rejected`` for input it cannot use."""
        ...
