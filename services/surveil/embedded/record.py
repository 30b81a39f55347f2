"""The floor played offline: the simulated devices' output through the real table side, into a
recorded event log.

The shoe's lines go through the shoe-reader's parser, the inputs and the shoe events through the
table-controller, its table events through the settlement service, all on the in-process bus.
What appears on the shoe, table and settlement topics is written in publish order, one CloudEvents
JSON object per line (gzipped when the file name ends in ``.gz``); the ground-truth labels go to
the side file ``<log>.labels.jsonl``. Settlement injections are done here, to the settlement
events as the settlement service published them.
"""

from __future__ import annotations

import gzip
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from ..core.findings import AlertCode
from ..core.money import RoundTotals, Settlement
from ..events import codec, models, topics
from ..events.deadletter import DeadLetter
from ..events.shoe_protocol import parse_line
from ..runtime.inproc import InProcessBus
from ..settlement.processor import SettlementProcessor
from ..sim.floor import Floor
from ..sim.injections import Label
from ..sim.table import OVERPAID, ShoeLine, TableInput, Tamper, Truth
from ..table_controller.processor import TableController

RECORDED_TOPICS = frozenset({topics.SHOE, topics.TABLE, topics.SETTLEMENT})


def labels_path(log: Path) -> Path:
    """``run.jsonl.gz`` -> ``run.labels.jsonl`` (beside it)."""
    name = log.name.removesuffix(".gz").removesuffix(".jsonl")
    return log.with_name(f"{name}.labels.jsonl")


@dataclass
class Recording:
    events: Counter[str] = field(default_factory=Counter)  # by type
    labels: int = 0
    dead_letters: list[DeadLetter] = field(default_factory=list)


class Tamperer:
    """Does the ordered settlement faults to the settlement events on their way to the log, and
    keeps each round's totals consistent with what its bets were paid, so that each fault is the
    only thing wrong."""

    def __init__(self, write: Callable[[models.Event], None]) -> None:
        self.write = write
        self.orders: dict[tuple[str, str], AlertCode] = {}
        self.adjustments: dict[str, RoundTotals] = {}  # round id -> what to add to its totals

    def order(self, tamper: Tamper) -> None:
        self.orders[(tamper.round_id, tamper.bet_id)] = tamper.code

    def __call__(self, event: models.Event) -> None:
        if isinstance(event, models.BetSettled):
            self._bet(event)
        elif isinstance(event, models.RoundSettled) and event.data.round_id in self.adjustments:
            self.write(self._adjusted(event, self.adjustments.pop(event.data.round_id)))
        else:
            self.write(event)

    def _bet(self, event: models.BetSettled) -> None:
        d = event.data
        code = self.orders.pop((d.round_id, d.bet_id), None)
        if code is None:
            self.write(event)
            return
        paid = RoundTotals().add(d.amount, Settlement(d.result, d.net, d.commission))
        if code is AlertCode.PAYOUT_MISMATCH:
            self.write(msgspec.structs.replace(event, data=msgspec.structs.replace(d, net=d.net + OVERPAID)))
            self.adjustments[d.round_id] = RoundTotals(paid_out=OVERPAID, house_net=-OVERPAID)
        elif code is AlertCode.UNSETTLED_BET:
            self.adjustments[d.round_id] = RoundTotals(-paid.staked, -paid.paid_out, -paid.commission, -paid.house_net)
        else:  # DUPLICATE_SETTLEMENT: paid twice, and counted twice in the round's totals
            self.write(event)
            self.write(msgspec.structs.replace(event, id=f"{event.id}/again"))
            self.adjustments[d.round_id] = paid

    @staticmethod
    def _adjusted(event: models.RoundSettled, change: RoundTotals) -> models.RoundSettled:
        d = event.data
        data = msgspec.structs.replace(
            d,
            staked=d.staked + change.staked,
            paid_out=d.paid_out + change.paid_out,
            commission=d.commission + change.commission,
            house_net=d.house_net + change.house_net,
        )
        return msgspec.structs.replace(event, data=data)


def record(
    floor: Floor,
    write_event: Callable[[models.Event], None],
    write_label: Callable[[Label], None],
    on_event: Callable[[models.Event], None] | None = None,
) -> Recording:
    """Play ``floor`` through the table side; every recorded event goes to ``write_event`` in
    publish order, every label to ``write_label``."""
    recording = Recording()
    bus = InProcessBus()
    bus.attach(TableController())
    bus.attach(SettlementProcessor())

    def written(event: models.Event) -> None:
        recording.events[event.event_type] += 1
        write_event(event)
        if on_event is not None:
            on_event(event)

    tamperer = Tamperer(written)
    bus.tap(lambda event: tamperer(event) if event.topic in RECORDED_TOPICS else None)
    for action in floor.actions():
        if isinstance(action, ShoeLine):
            bus.publish(parse_line(action.line, action.time).event)
        elif isinstance(action, TableInput):
            bus.publish(action.event)
        elif isinstance(action, Truth):
            recording.labels += 1
            write_label(action.label)
            continue
        else:
            tamperer.order(action)
            continue
        bus.run()
    recording.dead_letters = bus.dead_letters
    return recording


def record_to_files(floor: Floor, log: Path, on_event: Callable[[models.Event], None] | None = None) -> Recording:
    """``record`` into the log file (gzipped for ``.gz``) and its labels side file."""
    out = gzip.open(log, "wb") if log.suffix == ".gz" else open(log, "wb")
    with out, open(labels_path(log), "wb") as labels:

        def write_event(event: models.Event) -> None:
            out.write(codec.encode(event) + b"\n")

        def write_label(label: Label) -> None:
            labels.write(msgspec.json.encode(label) + b"\n")

        return record(floor, write_event, write_label, on_event)
