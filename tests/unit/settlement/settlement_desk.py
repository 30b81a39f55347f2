"""A table whose events a test writes by hand, settled by the real processor on an InProcessBus."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from surveil.core.money import Spot
from surveil.core.play import Outcome
from surveil.events import codec, topics
from surveil.events import models as m
from surveil.runtime.inproc import InProcessBus
from surveil.runtime.state import MemoryBackend
from surveil.settlement.ledger import Ledger
from surveil.settlement.processor import SettlementProcessor

START = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)  # 16:00 in Macau, shift 2026-11-29/2
SHIFT = "2026-11-29/2"
# Totals that give each outcome (no Banker 6, so both commission variants pay the same).
TOTALS = {Outcome.PLAYER: (8, 5), Outcome.BANKER: (5, 7), Outcome.TIE: (4, 4)}


class Desk:
    """Builds one table's events and settles them; ``settled`` collects what settlement published."""

    def __init__(self, table_id: str = "T07", profile: str = "dicj") -> None:
        self.table_id = table_id
        self.profile = profile
        self.backend = MemoryBackend()
        self.bus = InProcessBus(self.backend)
        self.bus.attach(SettlementProcessor())
        self.ledger = Ledger(self.backend)
        self.published: list[m.Event] = []
        self.bus.tap(lambda event: self.published.append(event) if event.topic == topics.SETTLEMENT else None)
        self.clock = START
        self._ids = itertools.count(1)

    def send(self, *events: m.Event) -> list[m.Event]:
        """Settle ``events``; what settlement published for them."""
        before = len(self.published)
        self.bus.publish(events)
        self.bus.run()
        return self.published[before:]

    def bets_settled(self, *events: m.Event) -> dict[str, m.BetSettledData]:
        return {e.data.bet_id: e.data for e in self.send(*events) if isinstance(e, m.BetSettled)}

    # ---- table events -----------------------------------------------------------------------

    def event(self, cls: type[m.Event], data: m.Data, at: datetime | None = None) -> m.Event:
        self.clock = at or self.clock + timedelta(seconds=5)
        return codec.make(
            cls, data, id=f"tc:{self.table_id}:{next(self._ids)}", source=f"table-controller/{self.table_id}", time=self.clock
        )

    def open(self, round_id: str, carried: tuple[str, ...] = (), profile: str | None = None, at: datetime | None = None) -> m.Event:
        return self.event(
            m.RoundOpened,
            m.RoundOpenedData(
                table_id=self.table_id,
                shoe_id="S1",
                round_id=round_id,
                round_no=1,
                dealer_id="D1",
                profile=profile or self.profile,
                demo=False,
                min_bet=100,
                max_bet=200_000,
                currency="HKD",
                carried_bet_ids=list(carried),
            ),
            at,
        )

    def bet(self, round_id: str, bet_id: str, spot: Spot, amount: int, patron: str = "P1") -> m.Event:
        return self.event(
            m.BetPlaced,
            m.BetPlacedData(table_id=self.table_id, round_id=round_id, bet_id=bet_id, patron_id=patron, seat="1", spot=spot, amount=amount),
        )

    def change(self, round_id: str, bet_id: str, spot: Spot, amount: int) -> m.Event:
        return self.event(
            m.BetChanged, m.BetChangedData(table_id=self.table_id, round_id=round_id, bet_id=bet_id, spot=spot, amount=amount)
        )

    def withdraw(self, round_id: str, bet_id: str) -> m.Event:
        return self.event(m.BetWithdrawn, m.BetWithdrawnData(table_id=self.table_id, round_id=round_id, bet_id=bet_id))

    def close(self, round_id: str) -> m.Event:
        return self.event(m.BetsClosed, m.BetsClosedData(table_id=self.table_id, round_id=round_id))

    def complete(
        self,
        round_id: str,
        outcome: Outcome,
        totals: tuple[int, int] | None = None,
        player_pair: bool = False,
        banker_pair: bool = False,
        at: datetime | None = None,
    ) -> m.Event:
        player_total, banker_total = totals or TOTALS[outcome]
        return self.event(
            m.RoundCompleted,
            m.RoundCompletedData(
                table_id=self.table_id,
                shoe_id="S1",
                round_id=round_id,
                player=[],
                banker=[],
                player_total=player_total,
                banker_total=banker_total,
                outcome=outcome,
                player_pair=player_pair,
                banker_pair=banker_pair,
                squeezed_by=None,
            ),
            at,
        )

    def void(self, round_id: str, at: datetime | None = None) -> m.Event:
        return self.event(m.RoundVoided, m.RoundVoidedData(table_id=self.table_id, round_id=round_id, reason="misdeal (Art. 10)"), at)

    def snapshot(self) -> tuple[dict[str, bytes], dict[str, dict[str, int]]]:
        """Everything the backend holds, to show that something changed nothing."""
        return dict(self.backend.data), {key: dict(values) for key, values in self.backend.hashes.items() if values}
