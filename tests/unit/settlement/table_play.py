"""Legal play at a simulated table, as the table-controller publishes it on ``baccarat.table``.

Rounds are dealt by ``core.play.deal`` from seeded, shuffled shoes; the bets are whatever a
callback chooses; Player and Banker bets left on a tie are named by the next round's opening
and stay on the layout (Art. 12). Used by the settlement tests and ``bench/settlement.py``
(import it as ``unit.settlement.table_play``, with ``tests/`` on the path).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from surveil.core.cards import Card
from surveil.core.money import Spot
from surveil.core.play import Outcome, deal
from surveil.core.profiles import load_profile
from surveil.core.shoe import shuffled_shoe
from surveil.events import codec
from surveil.events import models as m

START = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)  # 16:00 in Macau: shift 2026-11-29/2
CARDS_BEHIND_CUT = 14  # Art. 2.1: the cut card about 12 cards from the end; a round needs up to 6
SECONDS_PER_ROUND = 30


@dataclass(frozen=True)
class Bet:
    patron_id: str
    spot: Spot
    amount: int
    seat: str = "1"


Bets = Callable[[int], Iterable[Bet]]  # the round's number at the table -> the new bets


def one_of_each(amount: int = 1000) -> Bets:
    """A patron per spot, each staking ``amount`` every round (P1 Player ... P5 Banker Pair)."""
    spots = list(Spot)
    return lambda _: [Bet(f"P{n}", spot, amount, seat=str(n)) for n, spot in enumerate(spots, 1)]


@dataclass
class Table:
    table_id: str
    seed: int = 0
    profile: str = "dicj"
    decks: int = 8
    start: datetime = START
    rounds_played: int = 0
    carried: dict[str, Bet] = field(default_factory=dict)  # bet id -> a bet left on the last tie
    _rng: random.Random = field(init=False)
    _shoe: list[Card] = field(init=False, default_factory=list)
    _position: int = field(init=False, default=0)
    _shoes: int = field(init=False, default=0)
    _round_in_shoe: int = field(init=False, default=0)
    _events: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    @property
    def shoe_id(self) -> str:
        return f"{self.table_id}-S{self._shoes}"

    def round(self, bets: Iterable[Bet]) -> list[m.Event]:
        """One round: opened (naming the bets carried from a tie), the new bets, bets closed,
        completed. A round takes ``SECONDS_PER_ROUND`` of table time."""
        if len(self._shoe) - self._position < CARDS_BEHIND_CUT:
            self._new_shoe()
        self.rounds_played += 1
        self._round_in_shoe += 1
        round_id = f"{self.shoe_id}-R{self._round_in_shoe}"
        clock = self.start + timedelta(seconds=SECONDS_PER_ROUND * (self.rounds_played - 1))
        house = load_profile(self.profile)
        events = [
            self._event(
                m.RoundOpened,
                m.RoundOpenedData(
                    table_id=self.table_id,
                    shoe_id=self.shoe_id,
                    round_id=round_id,
                    round_no=self._round_in_shoe,
                    dealer_id="D1",
                    profile=self.profile,
                    demo=False,
                    min_bet=house.min_bet,
                    max_bet=house.max_bet,
                    currency="HKD",
                    carried_bet_ids=list(self.carried),
                ),
                clock,
            )
        ]
        on_layout = dict(self.carried)
        for n, bet in enumerate(bets, 1):
            bet_id = f"{round_id}-B{n}"
            on_layout[bet_id] = bet
            events.append(
                self._event(
                    m.BetPlaced,
                    m.BetPlacedData(
                        table_id=self.table_id,
                        round_id=round_id,
                        bet_id=bet_id,
                        patron_id=bet.patron_id,
                        seat=bet.seat,
                        spot=bet.spot,
                        amount=bet.amount,
                    ),
                    clock + timedelta(seconds=1),
                )
            )
        events.append(self._event(m.BetsClosed, m.BetsClosedData(table_id=self.table_id, round_id=round_id), clock + timedelta(seconds=10)))
        coup = deal(self._shoe[self._position : self._position + 6])
        # Art. 7: P, B, P, B, then the third cards, Player's first: the shoe indices in that order.
        order = "PBPB" + "P" * (len(coup.player) - 2) + "B" * (len(coup.banker) - 2)
        cards = {"P": iter(coup.player), "B": iter(coup.banker)}
        hands: dict[str, list[m.HandCard]] = {"P": [], "B": []}
        for index, hand in enumerate(order, self._position + 1):
            hands[hand].append(m.HandCard(index=index, card=next(cards[hand]).code))
        self._position += coup.cards_used
        result = coup.result
        events.append(
            self._event(
                m.RoundCompleted,
                m.RoundCompletedData(
                    table_id=self.table_id,
                    shoe_id=self.shoe_id,
                    round_id=round_id,
                    player=hands["P"],
                    banker=hands["B"],
                    player_total=result.player_total,
                    banker_total=result.banker_total,
                    outcome=result.outcome,
                    player_pair=result.player_pair,
                    banker_pair=result.banker_pair,
                    squeezed_by=None,
                ),
                clock + timedelta(seconds=25),
            )
        )
        self.carried = (
            {bet_id: bet for bet_id, bet in on_layout.items() if bet.spot in (Spot.PLAYER, Spot.BANKER)}
            if result.outcome is Outcome.TIE
            else {}
        )
        return events

    def _new_shoe(self) -> None:
        self._shoes += 1
        self._round_in_shoe = 0
        self._shoe = shuffled_shoe(self.decks, self._rng)
        self._position = self.decks  # the burn (Art. 2.1(a)): as many cards as decks

    def _event(self, cls: type[m.Event], data: m.Data, time: datetime) -> m.Event:
        self._events += 1
        return codec.make(
            cls, data, id=f"table-controller:{self.table_id}:{self._events}", source=f"table-controller/{self.table_id}", time=time
        )


def floor(table_ids: Iterable[str], rounds: int, bets: Bets, seed: int = 0) -> list[m.Event]:
    """``rounds`` rounds at each table, the tables' rounds interleaved as a floor publishes them."""
    tables = [Table(table_id, seed=seed + n) for n, table_id in enumerate(table_ids)]
    events: list[m.Event] = []
    for _ in range(rounds):
        for table in tables:
            events += table.round(bets(table.rounds_played + 1))
    return events
