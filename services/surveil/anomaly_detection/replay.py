"""Offline replay: a recorded event log through the same detectors as the live service.

A log is one CloudEvents JSON object per line (``.jsonl``, or gzipped ``.jsonl.gz``), in the order
the events were published. Lines that are not contract events are reported with their line
number and skipped; events of other topics (the table inputs, alerts) are passed over.
"""

from __future__ import annotations

import gzip
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ..detect.floor import Floor
from ..events import codec
from ..events.models import SETTLEMENT_TOPIC, SHOE_TOPIC, TABLE_TOPIC, AlertRaised, Event

WATCHED_TOPICS = frozenset({SHOE_TOPIC, TABLE_TOPIC, SETTLEMENT_TOPIC})


@dataclass(frozen=True, slots=True)
class BadLine:
    number: int
    reason: str


@dataclass
class ReplayResult:
    alerts: list[AlertRaised] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)
    events: int = 0
    events_by_type: Counter[str] = field(default_factory=Counter)
    rounds_checked: int = 0
    tables: int = 0


def open_log(path: Path) -> IO[bytes]:
    """The log's bytes, gunzipped when the file is gzip (by its magic number, not its name)."""
    with open(path, "rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gzipped else open(path, "rb")


def read_events(lines: Iterator[bytes], bad: Callable[[BadLine], None]) -> Iterator[Event]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield codec.decode(line)
        except codec.InvalidEventError as error:
            bad(BadLine(number, str(error)))


def replay(
    lines: Iterator[bytes],
    profile: str | None = None,
    on_alert: Callable[[AlertRaised], None] | None = None,
    on_event: Callable[[Event], None] | None = None,
) -> ReplayResult:
    """Feed every watched event of ``lines`` to a fresh ``Floor``; collect alerts and bad lines."""
    result = ReplayResult()
    floor = Floor(profile_override=profile)

    def emit(alerts: list[AlertRaised]) -> None:
        result.alerts.extend(alerts)
        if on_alert:
            for alert in alerts:
                on_alert(alert)

    by_class: dict[type[Event], int] = {}  # counted by class, named at the end: cheaper per event
    feed = floor.feed
    for event in read_events(lines, result.bad_lines.append):
        by_class[type(event)] = by_class.get(type(event), 0) + 1
        if on_event:
            on_event(event)
        if event.topic in WATCHED_TOPICS:
            alerts = feed(event)
            if alerts:
                emit(alerts)
    for cls, count in by_class.items():
        result.events_by_type[cls.__struct_config__.tag] += count  # type: ignore[index]
    result.events = result.events_by_type.total()
    emit(floor.flush())
    result.rounds_checked = floor.rounds_checked
    result.tables = len(floor.tables)
    return result
