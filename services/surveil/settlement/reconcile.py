"""Reconciliation: settle a recorded event log again, offline, and compare with the ledger.

The log's table events go through the same ``SettlementProcessor`` on an ``InProcessBus`` with
a ``MemoryBackend``; the ledger it builds is compared, shift by shift, with the one in Redis,
per table shift, patron, round and bet.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from ..events import codec
from ..events.deadletter import DeadLetter
from ..runtime.inproc import InProcessBus
from ..runtime.state import MemoryBackend
from .ledger import Ledger, ShiftLedger
from .processor import SettlementProcessor

EVENTS_PER_RUN = 1000  # events handed to the bus between runs: bounds its queue


@dataclass(frozen=True, slots=True)
class Recomputation:
    ledger: Ledger
    events: int  # lines read
    invalid: int  # lines that are not contract events
    dead_letters: list[DeadLetter]


def log_lines(path: Path, advanced: Callable[[int], None] = lambda _: None) -> Iterator[bytes]:
    """The lines of a recorded log (``.gz`` or not); ``advanced`` is told the bytes read so
    far from the file, which is what a progress bar over the file's size needs."""
    with path.open("rb") as raw:
        stream: BinaryIO = gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else raw  # type: ignore[assignment]
        for number, line in enumerate(stream, 1):
            if line.strip():
                yield line
            if number % EVENTS_PER_RUN == 0:
                advanced(raw.tell())
        advanced(raw.tell())


def recompute(lines: Iterator[bytes]) -> Recomputation:
    bus = InProcessBus(MemoryBackend())
    bus.attach(SettlementProcessor())
    events = invalid = 0
    for line in lines:
        events += 1
        try:
            bus.publish(codec.decode(line))
        except codec.InvalidEventError:
            invalid += 1  # the service would dead-letter it too: it changes nothing
        if events % EVENTS_PER_RUN == 0:
            bus.run()
    bus.run()
    return Recomputation(Ledger(bus.backend), events, invalid, bus.dead_letters)


@dataclass(frozen=True, slots=True)
class Difference:
    what: str  # e.g. "table T07 2026-11-29/3", "bet T07/R12/B3"
    field: str  # the field that differs, or "" when the entry is missing on one side
    recomputed: Any  # None: not in the recomputation
    ledger: Any  # None: not in the ledger

    def __str__(self) -> str:
        if self.recomputed is None:
            return f"{self.what}: in the ledger, not in the log"
        if self.ledger is None:
            return f"{self.what}: in the log, missing from the ledger"
        return f"{self.what}: {self.field} is {self.ledger} in the ledger, {self.recomputed} from the log"


def _fields(entry: Any) -> dict[str, Any]:
    return msgspec.structs.asdict(entry) if isinstance(entry, msgspec.Struct) else asdict(entry)


def _compare(kind: str, recomputed: Mapping[Any, Any], ledger: Mapping[Any, Any], name: Callable[[Any], str]) -> list[Difference]:
    differences = []
    for key in sorted(recomputed.keys() | ledger.keys()):
        what = f"{kind} {name(key)}"
        ours, theirs = recomputed.get(key), ledger.get(key)
        if ours is None or theirs is None:
            differences.append(Difference(what, "", ours, theirs))
            continue
        ours_fields, theirs_fields = _fields(ours), _fields(theirs)
        differences += [
            Difference(what, field, value, theirs_fields[field]) for field, value in ours_fields.items() if value != theirs_fields[field]
        ]
    return differences


def compare(recomputed: ShiftLedger, ledger: ShiftLedger) -> list[Difference]:
    """Every way ``ledger`` differs from ``recomputed``, per table shift, patron, round and bet."""
    shift = recomputed.shift
    return [
        *_compare("table", recomputed.tables, ledger.tables, lambda table: f"{table} {shift}"),
        *_compare("patron", recomputed.patrons, ledger.patrons, lambda patron: f"{patron} {shift}"),
        *_compare("round", recomputed.rounds, ledger.rounds, "/".join),
        *_compare("bet", recomputed.bets, ledger.bets, "/".join),
    ]
