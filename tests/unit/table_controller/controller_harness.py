"""A table-controller on a memory backend, and terse builders for its inputs and shoe events."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from surveil.events import codec
from surveil.events import models as m
from surveil.runtime.processor import Rejected
from surveil.runtime.state import MemoryBackend, State
from surveil.table_controller.processor import TableController

TABLE = "T01"
SHOE = "S1"
START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

INPUT_TYPES: dict[str, tuple[type[m.Event], type[m.Data]]] = {
    "open": (m.RoundOpen, m.RoundOpenInput),
    "place": (m.BetPlace, m.BetPlaceInput),
    "change": (m.BetChange, m.BetChangeInput),
    "withdraw": (m.BetWithdraw, m.BetWithdrawInput),
    "close": (m.BetsClose, m.BetsCloseInput),
    "burn": (m.CardsBurn, m.CardsBurnInput),
    "card": (m.CardPlace, m.CardPlaceInput),
    "squeeze": (m.Squeeze, m.SqueezeInput),
    "result": (m.Result, m.ResultInput),
    "void": (m.RoundVoid, m.RoundVoidInput),
}
ROUND_OPEN = {"shoe_id": SHOE, "dealer_id": "D1", "profile": "dicj", "demo": False, "min_bet": 500, "max_bet": 200000, "currency": "HKD"}


class Table:
    """Feeds one table's controller, committing after each event as a runner would."""

    def __init__(self, table_id: str = TABLE) -> None:
        self.table_id = table_id
        self.backend = MemoryBackend()
        self.state = State(self.backend, TableController.name)
        self.controller = TableController()
        self.clock = START
        self.ids = itertools.count(1)
        self.shoe_seq = itertools.count(1)

    # ---- building events ----------------------------------------------------------------------

    def input(self, kind: str, event_id: str | None = None, **data: Any) -> m.Event:
        cls, data_cls = INPUT_TYPES[kind]
        if kind == "open":
            data = {**ROUND_OPEN, **data}
        self.clock += timedelta(seconds=1)
        return codec.make(
            cls,
            data_cls(table_id=self.table_id, **data),
            id=event_id or f"{self.table_id}:in:{next(self.ids)}",
            source=f"console/{self.table_id}",
            time=self.clock,
        )

    def shoe_event(self, cls: type[m.Event], data: m.Data) -> m.Event:
        self.clock += timedelta(seconds=1)
        shoe_id = data.shoe_id  # type: ignore[attr-defined]
        return codec.make(
            cls, data, id=f"{self.table_id}:{shoe_id}:{next(self.shoe_seq)}", source=f"shoe-reader/{self.table_id}", time=self.clock
        )

    def started(self, shoe_id: str = SHOE) -> m.Event:
        return self.shoe_event(m.ShoeStarted, m.ShoeStartedData(table_id=self.table_id, shoe_id=shoe_id, decks=8, automatic=False))

    def read(self, index: int, card: str, shoe_id: str = SHOE) -> m.Event:
        return self.shoe_event(m.CardRead, m.CardReadData(table_id=self.table_id, shoe_id=shoe_id, index=index, card=card, face_up=False))

    def ended(self, cards_out: int, shoe_id: str = SHOE) -> m.Event:
        return self.shoe_event(m.ShoeEnded, m.ShoeEndedData(table_id=self.table_id, shoe_id=shoe_id, cards_out=cards_out))

    # ---- feeding ------------------------------------------------------------------------------

    def feed(self, event: m.Event) -> list[m.Event]:
        outputs = list(self.controller.process(event, self.state))
        self.state.commit()
        return outputs

    def do(self, kind: str, **data: Any) -> list[m.Event]:
        return self.feed(self.input(kind, **data))

    def rejects(self, event: m.Event) -> str:
        with pytest.raises(Rejected) as caught:
            self.controller.process(event, self.state)
        self.state.discard()
        return caught.value.reason

    def play(self, *cards: tuple[str, int, str | None], outcome: dict[str, Any] | None = None) -> list[m.Event]:
        """Place ``cards`` (hand, index, box card) and announce ``outcome``; the outputs."""
        for hand, index, card in cards:
            assert self.do("card", hand=hand, index=index, card=card) == []
        result = outcome or {"player_total": 0, "banker_total": 0, "outcome": "tie", "player_pair": False, "banker_pair": False}
        return self.do("result", **result)


def types(events: list[m.Event]) -> list[str]:
    return [event.__struct_config__.tag for event in events]  # type: ignore[attr-defined]


def data(event: m.Event) -> Any:
    return event.data  # type: ignore[attr-defined]
