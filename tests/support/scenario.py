"""Scripted tables for detector tests: a few lines build a legal recorded log, then a test
bends one thing and checks the detectors see exactly that.

``Scenario`` writes shoe and table events the way the shoe-reader and table-controller publish
them, and ``log()`` runs the table events through the real settlement processor so the log has
its settlement events too, in publish order.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from surveil.core.cards import CARDS, Card
from surveil.core.money import Spot, TieMove
from surveil.core.play import Coup, RoundResult, deal, result_of
from surveil.core.procedure import burn_due
from surveil.core.profiles import load_profile
from surveil.core.shoe import shuffled_shoe
from surveil.events import codec, topics
from surveil.events import models as m
from surveil.runtime.inproc import InProcessBus
from surveil.settlement.processor import SettlementProcessor

START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
BURN_FILLER = ("9D", "JC", "4S", "QD", "7S", "AC", "6D", "KC", "3H", "8D")  # distinct: never a ninth copy


@dataclass
class BetSpec:
    patron: str
    spot: Spot
    amount: int
    seat: str = "1"
    bet_id: str | None = None
    box: str | None = ""  # where the chips lie: "" for the bettor's own box (the seat's, or standing), None for not said


@dataclass
class Scenario:
    table: str = "T01"
    profile: str = "dicj"
    decks: int = 8
    automatic: bool = False
    min_bet: int = 500
    max_bet: int = 200_000
    dealer: str = "D01"
    seats: int | None = 7  # None: a log recorded before round.opened said it
    events: list[m.Event] = field(default_factory=list)
    clock: datetime = START
    shoe_id: str = ""
    index: int = 0  # cards out of the current shoe
    round_no: int = 0
    shoes: int = 0
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    last_round_id: str = ""
    cut_at: int | None = None  # the cut card comes out after this many cards
    tie_carried: list[str] = field(default_factory=list)  # Art. 12: bets play_shoe's last tie left on the table
    dead_letters: list[Any] = field(default_factory=list)

    # ---- plumbing -----------------------------------------------------------------------------

    def emit(self, cls: type[m.Event], data: m.Data, seconds: float = 1.0) -> m.Event:
        self.clock += timedelta(seconds=seconds)
        source = "shoe-reader" if cls.topic == topics.SHOE else "table-controller"
        event = codec.make(cls, data, id=f"{source}:{self.table}:{next(self._ids)}", source=f"{source}/{self.table}", time=self.clock)
        self.events.append(event)
        return event

    def read(self, card: str, face_up: bool = False) -> int:
        self.index += 1
        self.emit(m.CardRead, m.CardReadData(table_id=self.table, shoe_id=self.shoe_id, index=self.index, card=card, face_up=face_up))
        if self.index == self.cut_at:
            self.cut_card()
        return self.index

    # ---- the shoe -----------------------------------------------------------------------------

    def start_shoe(self, burn: Sequence[str] | None = None, first_card: str = "5S") -> None:
        """A new shoe, and the burn its house profile asks for (``burn`` overrides the cards)."""
        self.shoes += 1
        self.shoe_id = f"{self.table}-S{self.shoes}"
        self.index = 0
        self.round_no = 0
        self.emit(m.ShoeStarted, m.ShoeStartedData(table_id=self.table, shoe_id=self.shoe_id, decks=self.decks, automatic=self.automatic))
        if self.automatic and burn is None:
            return
        if burn is None:
            due = burn_due(load_profile(self.profile).burn, self.decks, CARDS[first_card])
            burn = [first_card, *BURN_FILLER][:due]
        self.burn(burn, round_id=None)

    def burn(self, cards: Sequence[str], round_id: str | None) -> None:
        indices = [self.read(card) for card in cards]
        self.emit(m.CardsBurned, m.CardsBurnedData(table_id=self.table, shoe_id=self.shoe_id, round_id=round_id, indices=indices))

    def cut_card(self) -> None:
        self.emit(m.CutCardReached, m.CutCardReachedData(table_id=self.table, shoe_id=self.shoe_id, index=self.index))

    def end_shoe(self) -> None:
        self.emit(m.ShoeEnded, m.ShoeEndedData(table_id=self.table, shoe_id=self.shoe_id, cards_out=self.index))

    # ---- a round ------------------------------------------------------------------------------

    def open_round(self, demo: bool = False, carried: Sequence[str] = (), dealer: str | None = None) -> str:
        self.round_no += 1
        round_id = f"{self.shoe_id}-R{self.round_no}"
        self.last_round_id = round_id
        self.emit(
            m.RoundOpened,
            m.RoundOpenedData(
                table_id=self.table,
                shoe_id=self.shoe_id,
                round_id=round_id,
                round_no=self.round_no,
                dealer_id=dealer or self.dealer,
                profile=self.profile,
                demo=demo,
                min_bet=self.min_bet,
                max_bet=self.max_bet,
                currency="HKD",
                carried_bet_ids=list(carried),
                seats=self.seats,
            ),
            seconds=20,
        )
        return round_id

    def place(self, round_id: str, bet: BetSpec) -> str:
        bet_id = bet.bet_id or f"B{next(self._ids)}"
        self.emit(
            m.BetPlaced,
            m.BetPlacedData(
                table_id=self.table,
                round_id=round_id,
                bet_id=bet_id,
                patron_id=bet.patron,
                seat=bet.seat,
                spot=bet.spot,
                amount=bet.amount,
                box=bet.seat if bet.box == "" else bet.box,
            ),
        )
        return bet_id

    def change(self, round_id: str, bet_id: str, spot: Spot, amount: int) -> None:
        self.emit(m.BetChanged, m.BetChangedData(table_id=self.table, round_id=round_id, bet_id=bet_id, spot=spot, amount=amount))

    def withdraw(self, round_id: str, bet_id: str) -> None:
        self.emit(m.BetWithdrawn, m.BetWithdrawnData(table_id=self.table, round_id=round_id, bet_id=bet_id))

    def close(self, round_id: str) -> None:
        self.emit(m.BetsClosed, m.BetsClosedData(table_id=self.table, round_id=round_id))

    def deal(self, round_id: str, cards: Sequence[str], **options: Any) -> Coup:
        """Deal ``cards`` (shoe order) by the rules, then place the hands as ``place_hands`` does."""
        coup = deal([CARDS[c] for c in (*cards, "2C", "2C")])
        self.place_hands(round_id, [c.code for c in coup.player], [c.code for c in coup.banker], **options)
        return coup

    def place_hands(
        self,
        round_id: str,
        player: Sequence[str],
        banker: Sequence[str],
        *,
        order: str | None = None,
        bend: Callable[[list[m.HandCard], list[m.HandCard]], None] | None = None,
        declare: dict[str, Any] | None = None,
        squeezed_by: str | None = None,
        extra_reads: Sequence[str] = (),
        face_up: Sequence[str] = (),
        brought: dict[int, int] | None = None,
        burn_after: tuple[int, Sequence[str]] | None = None,
    ) -> None:
        """The shoe reads the hands' cards in ``order`` (default P, B, P, B, then third cards) and
        the round completes with the result the cards give. ``bend`` may change the hands as the
        boxes report them, ``declare`` the announced result; ``extra_reads`` leave the shoe
        after the hands and go nowhere. ``brought`` (deal slot -> shoe index): that card does not
        come out of the shoe but is brought back under an index already used; ``burn_after``
        (cards dealt, cards): the dealer burns those cards after so many of the round's cards."""
        order = order or "PBPB" + "P" * (len(player) - 2) + "B" * (len(banker) - 2)
        queues = {"P": iter(player), "B": iter(banker)}
        hands: dict[str, list[m.HandCard]] = {"P": [], "B": []}
        for slot, hand in enumerate(order):
            if burn_after is not None and burn_after[0] == slot:
                self.burn(burn_after[1], round_id)
            card = next(queues[hand])
            index = brought[slot] if brought and slot in brought else self.read(card, face_up=card in face_up)
            hands[hand].append(m.HandCard(index=index, card=card))
        for card in extra_reads:
            self.read(card)
        if bend:
            bend(hands["P"], hands["B"])
        said = result_of([CARDS[c.card] for c in hands["P"]], [CARDS[c.card] for c in hands["B"]])
        declared: dict[str, Any] = {name: getattr(said, name) for name in RoundResult.__slots__}
        declared.update(declare or {})
        self.emit(
            m.RoundCompleted,
            m.RoundCompletedData(
                table_id=self.table,
                shoe_id=self.shoe_id,
                round_id=round_id,
                player=hands["P"],
                banker=hands["B"],
                squeezed_by=squeezed_by,
                **declared,
            ),
            seconds=15,
        )

    def void(
        self, round_id: str, player: Sequence[str], banker: Sequence[str], reason: str, *, face_up: Sequence[str] = (), order: str = ""
    ) -> None:
        """The shoe reads the cards dealt so far (``order``, default P, B, P, B, then third
        cards), then the round is voided as the table-controller voids one: its cards burned,
        then ``round.voided`` with the hands as dealt."""
        order = order or ("PBPB"[: min(len(player), len(banker)) * 2] + "P" * max(0, len(player) - len(banker)))
        order += "P" * (len(player) - order.count("P")) + "B" * (len(banker) - order.count("B"))
        queues = {"P": iter(player), "B": iter(banker)}
        hands: dict[str, list[m.PlacedCard]] = {"P": [], "B": []}
        for hand in order:
            card = next(queues[hand])
            hands[hand].append(m.PlacedCard(index=self.read(card, face_up=card in face_up), card=card))
        indices = sorted(c.index for c in (*hands["P"], *hands["B"]))
        if indices:
            self.emit(m.CardsBurned, m.CardsBurnedData(table_id=self.table, shoe_id=self.shoe_id, round_id=round_id, indices=indices))
        self.emit(
            m.RoundVoided, m.RoundVoidedData(table_id=self.table, round_id=round_id, reason=reason, player=hands["P"], banker=hands["B"])
        )

    def round(
        self,
        cards: Sequence[str],
        bets: Iterable[BetSpec] = (),
        *,
        carried: Sequence[str] = (),
        **deal_options: Any,
    ) -> tuple[str, list[str]]:
        """A whole round: open, bets, close, deal. Returns the round id and the bet ids."""
        round_id = self.open_round(carried=carried)
        bet_ids = [self.place(round_id, bet) for bet in bets]
        self.close(round_id)
        self.deal(round_id, cards, **deal_options)
        return round_id, bet_ids

    def play_shoe(
        self,
        rng: random.Random,
        bets: Callable[[Coup], Iterable[BetSpec]] = lambda coup: (),
        cut_behind: int = 40,
        pack: list[str] | None = None,
        cut_card: bool = True,
    ) -> list[str]:
        """A whole legal shoe from a shuffled pack (or ``pack``): burn, rounds until the cut card
        comes out (the next round is the last), shoe end. ``bets`` sees each round's coup before
        it is dealt; after a tie its Player and Banker bets are withdrawn where the house allows
        it, else carried (Art. 12). Not ``cut_card``: the shoe is dealt as far, but the cut card
        is never reported. Returns the shoe's cards in order."""
        pack = pack or [card.code for card in shuffled_shoe(self.decks, rng)]
        due = 0 if self.automatic else burn_due(load_profile(self.profile).burn, self.decks, CARDS[pack[0]])
        self.start_shoe(burn=pack[:due] if due else None)
        position = due
        last_place = len(pack) - cut_behind
        self.cut_at = last_place if cut_card else None
        # Art. 3.1 (finish): the round in progress when the cut card comes out is the last; if
        # it comes out between rounds, the next round is.
        while position <= last_place:
            coup = deal([CARDS[c] for c in pack[position : position + 6]])
            placed = list(bets(coup))
            _, bet_ids = self.round(pack[position : position + 6], placed, carried=self.tie_carried)
            # Art. 12: bettors take back what a tie left where the house allows it; else it stays
            tie = coup.result.outcome == "tie" and TieMove.WITHDRAW not in load_profile(self.profile).after_tie
            left = (i for i, b in zip(bet_ids, placed) if b.spot in (Spot.PLAYER, Spot.BANKER))
            self.tie_carried = [*self.tie_carried, *left] if tie else []
            position += coup.cards_used
            if position > last_place:
                break
        self.cut_at = None
        self.end_shoe()
        return pack

    # ---- the recorded log ---------------------------------------------------------------------

    def log(self) -> list[m.Event]:
        """Every event as the topics would carry it: shoe and table events, and the settlement
        events the real settlement processor publishes for them, in publish order."""
        bus = InProcessBus()
        bus.attach(SettlementProcessor())
        recorded: list[m.Event] = []
        bus.tap(recorded.append)
        for event in self.events:
            bus.publish(event)
            bus.run()
        self.dead_letters = bus.dead_letters  # what settlement refused (e.g. a self-contradicting result)
        return recorded


def lines(events: Iterable[m.Event]) -> list[bytes]:
    return [codec.encode(event) for event in events]


def cards(*codes: str) -> list[Card]:
    return [CARDS[c] for c in codes]


BANKER_NATURAL = ["2H", "8C", "3D", "KS"]  # P 5, B 8: nobody draws


def table(build: Callable[[Scenario], None], **options: Any) -> list[m.Event]:
    """A shoe with the right burn, one legal round, the round under test, then the cut card, the
    last round and the shoe's end."""
    s = Scenario(**options)
    s.start_shoe()
    s.round(BANKER_NATURAL, [BetSpec("P1", Spot.BANKER, 1000)])
    build(s)
    s.cut_card()
    s.round(["9H", "2C", "KD", "5S"], [BetSpec("P1", Spot.PLAYER, 500)])
    s.end_shoe()
    return s.log()


def banker_natural_from(pack: list[str]) -> list[str]:
    """Take four cards out of ``pack`` dealing Player 6 or 7 against a Banker natural."""
    for i, p1 in enumerate(pack):
        for j, p2 in enumerate(pack):
            if i != j and (CARDS[p1].points + CARDS[p2].points) % 10 in (6, 7):
                rest = [c for k, c in enumerate(pack) if k not in (i, j)]
                for a, b1 in enumerate(rest):
                    for b, b2 in enumerate(rest):
                        if a != b and (CARDS[b1].points + CARDS[b2].points) % 10 in (8, 9):
                            for card in (p1, p2, b1, b2):
                                pack.remove(card)
                            return [p1, b1, p2, b2]
    raise AssertionError("pack exhausted")
