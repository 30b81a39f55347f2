"""One simulated baccarat table: shoes, patrons, bets, dealers and rounds, as the table's devices
report them: the card-reading shoe's lines (docs/shoe-protocol.md) and the console, bet-sensor
and hand-box inputs (docs/table-inputs.md). Pure and deterministic: everything random comes from
one ``random.Random`` for the table, derived from the run's seed and the table id.

Play follows the rules and the house profile: the shoe is shuffled, the cut card goes in 14-80
cards from the end (Art. 2.1), the start of each shoe is burned by the profile's policy, some
shoes start with up to 3 demonstration rounds (Art. 2.2), cards are dealt P, B, P, B and then
third cards by Art. 9, the last round after the cut card follows Art. 3.1, bets respect the
minimum, the Banker multiple and Art. 14, and bets left on a tie change only as the profile
allows (Art. 12). Irregularities are put in only on request (``injections.py``), each with its
ground-truth label.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..core import money
from ..core.cards import CARDS, DECK, Card
from ..core.findings import AlertCode
from ..core.money import BetResult, Spot, TieMove
from ..core.play import PLAYER_DRAWS, RoundResult, banker_rule, deal, hand_total, outcome_of, result_of
from ..core.procedure import DEMO_ROUNDS_MAX, burn_due
from ..core.profiles import HouseProfile, LastRound
from ..core.shoe import DealingShoe, shuffled_shoe
from ..core.table import Bet, Round, squeeze_stakes
from ..events import codec, models
from ..events.shoe_protocol import Kind, format_line
from .injections import DRAW_ERRORS, SCOPES, TIE_CHANGES, Label, Scope

START = datetime(2026, 11, 29, tzinfo=UTC)
ROUND_SECONDS = 50  # a round, from opening to the next opening, on average
SEATS = tuple(str(seat) for seat in range(1, 8))
CURRENCY = "HKD"
CHIPS = (1, 1, 1, 1, 2, 2, 2, 3, 4, 5, 6, 8, 10, 15, 20)  # a stake in table minimums
MIN_CARDS_FOR_A_ROUND = 8  # six for the round, one more for a palmed card, one to spare
BIASED_SHOE_OTHER_ODDS = 0.15  # a biased shoe keeps a round Banker does not win this often
ERROR_PRONE_RATE = 0.35  # rounds with a dealing error, for an error-prone dealer
REPEAT_RUN = 24  # cards a repeated shoe copies from the one before


@dataclass(frozen=True, slots=True)
class ShoeLine:
    time: datetime
    table_id: str
    seq: int
    line: bytes


@dataclass(frozen=True, slots=True)
class TableInput:
    time: datetime
    table_id: str
    event: models.Event


@dataclass(frozen=True, slots=True)
class Truth:
    """A ground-truth label, at the time the irregularity was done."""

    time: datetime
    table_id: str
    label: Label


@dataclass(frozen=True, slots=True)
class Tamper:
    """Orders a change to a bet's settlement events, once the settlement service produced them."""

    time: datetime
    table_id: str
    code: AlertCode
    round_id: str
    bet_id: str


Action = ShoeLine | TableInput | Truth | Tamper


class TableSim:
    """A table's play as a stream of actions in time order (``actions``)."""

    def __init__(self, table_id: str, seed: int, profile: HouseProfile, shoes: int, injections: Sequence[AlertCode] = ()) -> None:
        self.table_id = table_id
        self.rng = random.Random(f"{seed}/{table_id}")
        self.profile = profile
        self.shoes = shoes
        self.queue: deque[AlertCode] = deque(injections)
        self.armed_at = self.rng.randint(3, 12)  # an injection into a round waits until this many rounds were played
        self.clock = START + timedelta(milliseconds=self.rng.randrange(ROUND_SECONDS * 1000))
        self.box_sees_cards = self.rng.random() < 0.5  # a hand box that recognises cards
        self.out: list[Action] = []
        self.line_seq = 0
        self.input_seq = 0
        self.bet_seq = 0
        self.patron_seq = 0
        self.rounds_played = 0
        self.round_shoe: str | None = None  # the shoe of the latest round, and its number in it
        self.round_no = 0
        self.dealers = [f"D{table_id}-{k}" for k in range(1, 4)]
        self.dealer = self.rng.randrange(len(self.dealers))
        self.dealer_rounds_left = self.rng.randint(20, 30)
        self.seats: dict[str, str | None] = dict.fromkeys(SEATS)
        self.standing: list[str] = []
        self.carried: dict[str, Bet] = {}
        self.previous_cards: list[Card] = []  # as the last shoe dealt them
        self.previous_shoe = ""
        # What the shoe at hand is doing wrong, for the whole shoe.
        self.shoe_injection: AlertCode | None = None
        self.cheater: str | None = None
        self.start_burn: list[tuple[int, Card]] = []  # the cards burned at the shoe's start, by index

    # ---- the stream -----------------------------------------------------------------------------

    def actions(self) -> Iterator[Action]:
        for shoe_no in range(1, self.shoes + 1):
            for chunk in self._shoe(f"S{shoe_no:04d}"):
                yield from chunk

    def unapplied(self) -> list[AlertCode]:
        return list(self.queue)

    def _flush(self) -> list[Action]:
        out, self.out = self.out, []
        return out

    def _advance(self, low_ms: int, high_ms: int) -> datetime:
        self.clock += timedelta(milliseconds=self.rng.randint(low_ms, high_ms))
        return self.clock

    def _line(self, kind: Kind, shoe_id: str, *arguments: object) -> None:
        self.line_seq += 1
        line = format_line(self.table_id, self.line_seq, self.clock, kind, shoe_id, *arguments)
        self.out.append(ShoeLine(self.clock, self.table_id, self.line_seq, line))

    def _input(self, cls: type[models.Event], data: models.Data, device: str) -> None:
        self.input_seq += 1
        event = codec.make(cls, data, id=f"{self.table_id}:in:{self.input_seq}", source=f"{device}/{self.table_id}", time=self.clock)
        self.out.append(TableInput(self.clock, self.table_id, event))

    def _label(self, code: AlertCode, shoe: DealingShoe, description: str, rnd: Round | None = None, **extra: str) -> None:
        label = Label(
            table_id=self.table_id,
            shoe_id=shoe.shoe_id,
            code=str(code),
            description=description,
            round_id=rnd.round_id if rnd else None,
            round_no=rnd.round_no if rnd else None,
            dealer_id=rnd.dealer_id if rnd else extra.pop("dealer_id", None),
            **extra,
        )
        self.out.append(Truth(self.clock, self.table_id, label))

    # ---- injections -----------------------------------------------------------------------------

    def _armed(self, shoe_start: bool) -> AlertCode | None:
        """The injection to do now, if any: at a shoe's start the next one if it is done to a
        shoe; in a round the next one if it is not and its time has come."""
        if not self.queue:
            return None
        head = self.queue[0]
        if shoe_start:
            return head if SCOPES[head] is Scope.SHOE else None
        return head if SCOPES[head] is not Scope.SHOE and self.rounds_played >= self.armed_at else None

    def _injected(self) -> None:
        self.queue.popleft()
        self.armed_at = self.rounds_played + self.rng.randint(2, 5)

    # ---- a shoe -----------------------------------------------------------------------------------

    def _shoe(self, shoe_id: str) -> Iterator[list[Action]]:
        profile = self.profile
        injection = self._armed(shoe_start=True)
        if injection is AlertCode.SHOE_REPEAT and not self.previous_cards:
            injection = None
        if injection is AlertCode.DEMO_ROUNDS and self.carried:
            injection = None  # bets carried from a tie are never on a demonstration round
        self.shoe_injection = injection
        cards = self._cards(injection)
        low, high = _CARDS_BEHIND_CUT.get(injection, (14, 80)) if injection else (14, 80)
        shoe = DealingShoe(shoe_id, cards, cut=len(cards) - self.rng.randint(low, high))
        if injection is AlertCode.CUT_CARD_MISSING:
            shoe.cut = len(cards) + 1  # the cut card was never put in: the shoe is dealt to its end
        if self.previous_shoe:
            self._advance(90_000, 150_000)  # shuffling
        self._line(Kind.START, shoe_id, profile.decks, "manual")
        self._seat_patrons()
        self._burn(shoe, injection)
        if injection in _SHOE_SENTENCES:
            self._label(injection, shoe, _SHOE_SENTENCES[injection].format(behind=len(cards) - shoe.cut, previous=self.previous_shoe))
        if injection is AlertCode.DEALER_ERROR_RATE:
            self._label(
                injection,
                shoe,
                f"Dealer {self.dealers[self.dealer]} deals this whole shoe and makes a dealing error in about "
                f"{ERROR_PRONE_RATE:.0%} of its rounds (each one labelled with its own code).",
                dealer_id=self.dealers[self.dealer],
            )
        if injection is AlertCode.PATRON_WIN_RATE:
            self.cheater = self._new_patron()
            self._label(
                injection,
                shoe,
                f"Patron {self.cheater}, standing, knows each round's outcome and bets on the winner "
                "in every round of this shoe that is not a tie.",
                patron_id=self.cheater,
            )
        yield self._flush()
        demos = self._demo_count(injection)
        for _ in range(demos):
            self._round(shoe, demo=True)
            yield self._flush()
        if injection is AlertCode.DEMO_ROUNDS:
            self._label(injection, shoe, f"{demos} demonstration rounds at the start of the shoe; at most {DEMO_ROUNDS_MAX} are allowed.")
            self._injected()
            yield self._flush()
        rounds_left_after_cut = 1 if profile.last_round is LastRound.ONE_MORE else 0
        extra_round = injection is AlertCode.ROUNDS_AFTER_CUT_CARD
        while shoe.remaining >= MIN_CARDS_FOR_A_ROUND:
            if shoe.cut_out:
                if rounds_left_after_cut == 0:
                    if not extra_round:
                        break
                    extra_round = False
                    self._round(shoe, demo=False, after_cut_extra=True)
                    self._injected()
                    yield self._flush()
                    break
                rounds_left_after_cut -= 1
            self._round(shoe, demo=False)
            yield self._flush()
        self._advance(2_000, 4_000)
        self._line(Kind.END, shoe_id, shoe.pos)
        self.previous_cards, self.previous_shoe = shoe.cards[: shoe.pos], shoe_id
        if injection in (
            AlertCode.CUT_CARD_DEPTH,
            AlertCode.CUT_CARD_MISSING,
            AlertCode.OUTCOME_DRIFT,
            AlertCode.PATRON_WIN_RATE,
            AlertCode.DEALER_ERROR_RATE,
            AlertCode.SHOE_REPEAT,
        ):
            self._injected()
        self.shoe_injection, self.cheater = None, None
        yield self._flush()

    def _cards(self, injection: AlertCode | None) -> list[Card]:
        decks = self.profile.decks
        cards = shuffled_shoe(decks, self.rng)
        if injection is AlertCode.OUTCOME_DRIFT:
            return self._biased(cards)
        if injection is AlertCode.SHOE_REPEAT:
            run = self.previous_cards[30 : 30 + REPEAT_RUN]
            for card in run:
                cards.remove(card)  # the same copies, so the shoe still holds exactly its decks
            return cards[:40] + run + cards[40:]
        return cards

    def _biased(self, cards: list[Card]) -> list[Card]:
        """A shoe stacked so the Banker wins most rounds: after the burn, each round's cards are
        drawn from what is left until the deal is a Banker win (or, rarely, is kept anyway)."""
        burn = burn_due(self.profile.burn, self.profile.decks, cards[0])
        stacked, pool = cards[:burn], cards[burn:]
        while len(pool) >= 6:
            while True:
                picks = self.rng.sample(range(len(pool)), 6)
                coup = deal([pool[i] for i in picks])
                if coup.result.outcome == "banker" or self.rng.random() < BIASED_SHOE_OTHER_ODDS:
                    break
            used = picks[: coup.cards_used]
            stacked += [pool[i] for i in used]
            for i in sorted(used, reverse=True):
                del pool[i]
        return stacked + pool

    def _burn(self, shoe: DealingShoe, injection: AlertCode | None) -> None:
        """Art. 2.1: burn at the shoe's start by the house's policy (the first card decides under
        the first-card policy)."""
        due = burn_due(self.profile.burn, self.profile.decks, shoe.cards[0])
        count = due + 1 if injection is AlertCode.BURN_COUNT else due
        self._advance(5_000, 10_000)
        burned = [self._draw(shoe) for _ in range(count)]
        self.start_burn = burned
        indices = [index for index, _ in burned]
        self._advance(1_000, 2_000)
        self._input(models.CardsBurn, models.CardsBurnInput(table_id=self.table_id, indices=indices), "console")
        if injection is AlertCode.BURN_COUNT:
            self._label(
                injection, shoe, f"{count} cards burned at the start of the shoe where the {self.profile.burn.policy} policy burns {due}."
            )
            self._injected()

    def _demo_count(self, injection: AlertCode | None) -> int:
        if injection is AlertCode.DEMO_ROUNDS:
            return DEMO_ROUNDS_MAX + 1
        if self.carried or injection in (AlertCode.OUTCOME_DRIFT, AlertCode.PATRON_WIN_RATE):
            return 0  # carried bets go on a real round; a stacked shoe's rounds start after the burn
        return self.rng.randint(1, DEMO_ROUNDS_MAX) if self.rng.random() < 0.3 else 0

    def _draw(self, shoe: DealingShoe, face_up: bool = False) -> tuple[int, Card]:
        """The next card out of the shoe, as the shoe reads it (the cut card first, if it is next)."""
        if not shoe.cut_out and shoe.pos == shoe.cut:
            shoe.cut_out = True
            self._line(Kind.CUT, shoe.shoe_id, shoe.pos)
        card = shoe.cards[shoe.pos]
        shoe.pos += 1
        self._advance(1_500, 2_500)
        self._line(Kind.CARD, shoe.shoe_id, shoe.pos, card.code, "up" if face_up else "down")
        return shoe.pos, card

    # ---- patrons ----------------------------------------------------------------------------------

    def _new_patron(self) -> str:
        self.patron_seq += 1
        return f"P{self.table_id}-{self.patron_seq}"

    def _seat_patrons(self) -> None:
        """Between shoes some patrons leave and others sit down; bettors carried on a tie stay."""
        staying = {bet.patron_id for bet in self.carried.values()}
        for seat, patron in self.seats.items():
            if patron in staying:
                continue
            if patron is None or self.rng.random() < 0.2:
                self.seats[seat] = self._new_patron() if self.rng.random() < 0.6 else None
        kept = [p for p in self.standing if p in staying]
        self.standing = kept + [self._new_patron() for _ in range(self.rng.randint(0, 3))]

    # ---- a round ----------------------------------------------------------------------------------

    def _dealer_id(self) -> str:
        if self.shoe_injection is not AlertCode.DEALER_ERROR_RATE:
            self.dealer_rounds_left -= 1
            if self.dealer_rounds_left <= 0:
                self.dealer = (self.dealer + 1) % len(self.dealers)
                self.dealer_rounds_left = self.rng.randint(20, 30)
        return self.dealers[self.dealer]

    def _round(self, shoe: DealingShoe, demo: bool, after_cut_extra: bool = False) -> None:
        profile = self.profile
        opened_at = self.clock
        if shoe.shoe_id != self.round_shoe:
            self.round_shoe, self.round_no = shoe.shoe_id, 0
        self.round_no += 1
        round_id = models.round_id_of(self.table_id, shoe.shoe_id, self.round_no)
        rnd = Round(
            self.table_id,
            round_id,
            shoe.shoe_id,
            self.round_no,
            self._dealer_id(),
            profile.name,
            demo,
            profile.min_bet,
            profile.max_bet,
            CURRENCY,
            self.carried,
        )
        self.carried = {}
        injection = None if demo else self._armed(shoe_start=False)
        self._input(
            models.RoundOpen,
            models.RoundOpenInput(
                table_id=self.table_id,
                shoe_id=shoe.shoe_id,
                dealer_id=rnd.dealer_id,
                profile=profile.name,
                demo=demo,
                min_bet=profile.min_bet,
                max_bet=profile.max_bet,
                currency=CURRENCY,
                seats=len(SEATS),
            ),
            "console",
        )
        done = False
        if not demo:
            done = self._bets(shoe, rnd, injection)
        self.clock = max(self.clock, opened_at + timedelta(seconds=10 if demo else 25))
        self._advance(500, 1_500)
        self._input(models.BetsClose, models.BetsCloseInput(table_id=self.table_id), "console")
        if injection is AlertCode.LATE_BET:
            done = self._late_bet(shoe, rnd)
        elif injection is AlertCode.CARD_OVERCOUNT:
            done = self._foreign_card(shoe, rnd)
        elif injection is AlertCode.ROUND_VOIDED and not shoe.cut_out and shoe.cut - shoe.pos > MIN_CARDS_FOR_A_ROUND:
            self._void(shoe, rnd)
            self._injected()
            self.clock = max(self.clock + timedelta(seconds=2), opened_at + timedelta(milliseconds=self.rng.randint(45_000, 55_000)))
            return
        error = injection if injection in _DEALING_ERRORS and self._can_deal_wrong(shoe, injection) else None
        if self.shoe_injection is AlertCode.DEALER_ERROR_RATE and not demo and self.rng.random() < ERROR_PRONE_RATE:
            error = self._pick_error(shoe)
        result = self._deal(shoe, rnd, error, wrong_holder=injection is AlertCode.SQUEEZE_HOLDER)
        done = done or (error is not None and error is injection) or injection is AlertCode.SQUEEZE_HOLDER
        declared = result
        if injection is AlertCode.RESULT_MISMATCH:
            wrong = (result.banker_total + 1) % 10
            declared = RoundResult(
                result.player_total, wrong, outcome_of(result.player_total, wrong), result.player_pair, result.banker_pair
            )
            self._label(
                injection,
                shoe,
                f"The console announced Player {declared.player_total}, Banker {wrong} ({declared.outcome}) where "
                f"the cards give Banker {result.banker_total} ({result.outcome}).",
                rnd,
            )
            done = True
        elif injection is not None and SCOPES[injection] is Scope.SETTLEMENT:
            done = self._tamper(shoe, rnd, injection, declared)
        if after_cut_extra:
            self._label(
                AlertCode.ROUNDS_AFTER_CUT_CARD,
                shoe,
                f"One round more than the house's last-round policy ({profile.last_round}) allows was played after the cut card came out.",
                rnd,
            )
        self._advance(2_000, 4_000)
        self._input(
            models.Result,
            models.ResultInput(
                table_id=self.table_id,
                player_total=declared.player_total,
                banker_total=declared.banker_total,
                outcome=declared.outcome,
                player_pair=declared.player_pair,
                banker_pair=declared.banker_pair,
            ),
            "console",
        )
        if declared.outcome == "tie":  # Art. 12: the table acts on the result it announced
            self.carried = {b.bet_id: b for b in rnd.active_bets() if b.spot in (Spot.PLAYER, Spot.BANKER)}
        if not demo:
            self.rounds_played += 1
        if done:
            self._injected()
        length = self.rng.randint(25_000, 30_000) if demo else self.rng.randint(45_000, 55_000)
        self.clock = max(self.clock + timedelta(seconds=2), opened_at + timedelta(milliseconds=length))

    # ---- bets -------------------------------------------------------------------------------------

    def _bets(self, shoe: DealingShoe, rnd: Round, injection: AlertCode | None) -> bool:
        """Betting, until bets close: carried bets first (Art. 12), then new bets, changes and
        withdrawals, all within the rules; an injected bet irregularity last."""
        done = False
        carried = list(rnd.bets.values())
        if injection in TIE_CHANGES and carried:
            target = self._forbidden_tie_change(shoe, rnd, carried, TIE_CHANGES[injection], injection)
            done = target is not None
            carried = [bet for bet in carried if bet is not target]
        for bet in carried:
            self._carried_change(rnd, bet)
        placed = []
        for seat, patron in self.seats.items():
            if patron is not None and self.rng.random() < 0.75:
                placed += self._patron_bets(rnd, patron, seat)
        for patron in self.standing:
            if self.rng.random() < 0.5:
                placed += self._patron_bets(rnd, patron, "standing")
        if self.cheater is not None:
            outcome = deal(shoe.cards[shoe.pos : shoe.pos + 6]).result.outcome
            if outcome != "tie":
                self._place(rnd, self.cheater, "standing", Spot(outcome.value), self.profile.min_bet * self.rng.randint(1, 4))
        for bet in placed:
            self._maybe_change(rnd, bet)
        if injection in (AlertCode.BANKER_BET_MULTIPLE, AlertCode.BET_BELOW_MINIMUM, AlertCode.TABLE_LIMIT):
            self._bad_bet(shoe, rnd, injection)
            done = True
        elif injection is AlertCode.STANDING_BET_ON_SEAT_BOX:
            done = self._standing_on_seat_box(shoe, rnd)
        return done

    def _standing_on_seat_box(self, shoe: DealingShoe, rnd: Round) -> bool:
        """Art. 15: a standing patron puts chips in the box of a seat."""
        patron, _ = self._someone(seated=False)
        box = self.rng.choice(SEATS)
        bet = self._place(rnd, patron, "standing", Spot.PLAYER, self.profile.min_bet, box=box)
        if bet is None:
            return False
        self._label(
            AlertCode.STANDING_BET_ON_SEAT_BOX,
            shoe,
            f"Standing patron {patron} placed a Player bet of {bet.amount} in the box of seat {box}, reserved for seated bettors (Art. 15).",
            rnd,
            patron_id=patron,
            bet_id=bet.bet_id,
        )
        return True

    def _stake(self, spot: Spot) -> int:
        minimum = self.profile.min_bet
        if spot is Spot.BANKER:
            return minimum * self.rng.choice(CHIPS)  # house rule: a multiple of the minimum
        if spot is Spot.PLAYER:
            return minimum * self.rng.choice(CHIPS) + self.rng.choice((0, 0, 0, 100, 200, 500))
        return minimum * self.rng.choice((1, 1, 2))

    def _within_limit(self, rnd: Round, spot: Spot, amount: int, replacing: Bet | None = None) -> bool:
        """Art. 14: the Banker/Player difference, and each side spot, within the table limit."""
        stakes = [(b.spot, b.amount) for b in rnd.active_bets() if b is not replacing] + [(spot, amount)]
        return not money.check_table_limit(money.spot_totals(stakes), self.profile.max_bet)

    def _patron_bets(self, rnd: Round, patron: str, seat: str) -> list[Bet]:
        bets = []
        spot = Spot.BANKER if self.rng.random() < 0.5 else Spot.PLAYER
        bets.append(self._place(rnd, patron, seat, spot, self._stake(spot)))
        for side in sorted(self.profile.side_bets):
            if self.rng.random() < (0.08 if side is Spot.TIE else 0.05):
                bets.append(self._place(rnd, patron, seat, side, self._stake(side)))
        return [bet for bet in bets if bet is not None]

    def _place(self, rnd: Round, patron: str, seat: str, spot: Spot, amount: int, check: bool = True, box: str | None = None) -> Bet | None:
        """A bet, its chips in the bettor's own box (a seated bettor's seat box, or the standing
        bettors' area, Art. 15) unless ``box`` says otherwise."""
        if check and not self._within_limit(rnd, spot, amount):
            return None
        self.bet_seq += 1
        bet = Bet(f"B{self.table_id}-{self.bet_seq}", patron, seat, spot, amount, box=box or seat)
        rnd.bets[bet.bet_id] = bet
        self._advance(500, 2_500)
        self._input(
            models.BetPlace,
            models.BetPlaceInput(
                table_id=self.table_id, bet_id=bet.bet_id, patron_id=patron, seat=seat, spot=spot, amount=amount, box=bet.box
            ),
            "bet-sensor",
        )
        return bet

    def _change(self, bet: Bet, spot: Spot, amount: int) -> None:
        bet.spot, bet.amount = spot, amount
        self._advance(500, 2_000)
        self._input(
            models.BetChange, models.BetChangeInput(table_id=self.table_id, bet_id=bet.bet_id, spot=spot, amount=amount), "bet-sensor"
        )

    def _withdraw(self, bet: Bet) -> None:
        bet.withdrawn = True
        self._advance(500, 2_000)
        self._input(models.BetWithdraw, models.BetWithdrawInput(table_id=self.table_id, bet_id=bet.bet_id), "bet-sensor")

    def _maybe_change(self, rnd: Round, bet: Bet) -> None:
        """A patron changes their mind before bets close: a new stake, the other side, or no bet."""
        draw = self.rng.random()
        if draw < 0.03:
            self._withdraw(bet)
        elif draw < 0.09:
            amount = self._stake(bet.spot)
            if amount != bet.amount and self._within_limit(rnd, bet.spot, amount, replacing=bet):
                self._change(bet, bet.spot, amount)
        elif draw < 0.12 and bet.spot in (Spot.PLAYER, Spot.BANKER):
            self._move(rnd, bet)

    def _move(self, rnd: Round, bet: Bet) -> bool:
        """Player to Banker (only a multiple of the minimum may go there) or Banker to Player."""
        other = Spot.PLAYER if bet.spot is Spot.BANKER else Spot.BANKER
        if other is Spot.BANKER and bet.amount % self.profile.min_bet:
            return False
        if not self._within_limit(rnd, other, bet.amount, replacing=bet):
            return False
        self._change(bet, other, bet.amount)
        return True

    def _carried_change(self, rnd: Round, bet: Bet) -> None:
        """Art. 12 and the house profile: what a bettor does with a bet left on a tie."""
        weights = {TieMove.KEEP: 70, TieMove.INCREASE: 15, TieMove.WITHDRAW: 5, TieMove.REDUCE: 5, TieMove.MOVE: 5}
        moves = [move for move in weights if move in self.profile.after_tie]
        move = self.rng.choices(moves, [weights[m_] for m_ in moves])[0]
        minimum = self.profile.min_bet
        if move is TieMove.INCREASE and self._within_limit(rnd, bet.spot, bet.amount + minimum, replacing=bet):
            self._change(bet, bet.spot, bet.amount + minimum)
        elif (
            move is TieMove.REDUCE and bet.amount >= 2 * minimum and self._within_limit(rnd, bet.spot, bet.amount - minimum, replacing=bet)
        ):
            self._change(bet, bet.spot, bet.amount - minimum)
        elif move is TieMove.MOVE:
            self._move(rnd, bet)
        elif move is TieMove.WITHDRAW:
            self._withdraw(bet)

    def _forbidden_tie_change(self, shoe: DealingShoe, rnd: Round, carried: list[Bet], move: TieMove, code: AlertCode) -> Bet | None:
        minimum = self.profile.min_bet
        for bet in carried:
            before = f"{bet.spot} {bet.amount}"
            if move is TieMove.WITHDRAW:
                self._withdraw(bet)
            elif move is TieMove.REDUCE:
                if bet.amount < 2 * minimum or not self._within_limit(rnd, bet.spot, bet.amount - minimum, replacing=bet):
                    continue
                self._change(bet, bet.spot, bet.amount - minimum)
            elif not self._move(rnd, bet):
                continue
            after = "withdrawn" if bet.withdrawn else f"now {bet.spot} {bet.amount}"
            self._label(
                code,
                shoe,
                f"Bet {bet.bet_id} ({before}), carried over from a tie, was {after}, which the {self.profile.name} house rules forbid.",
                rnd,
                patron_id=bet.patron_id,
                bet_id=bet.bet_id,
            )
            return bet
        return None

    def _someone(self, seated: bool) -> tuple[str, str]:
        """A patron at the table (seated or standing), and where."""
        if seated:
            taken = [(patron, seat) for seat, patron in self.seats.items() if patron is not None]
            if taken:
                return self.rng.choice(taken)
            return self._new_patron(), next(seat for seat, patron in self.seats.items() if patron is None)
        if not self.standing:
            self.standing.append(self._new_patron())
        return self.rng.choice(self.standing), "standing"

    def _bad_bet(self, shoe: DealingShoe, rnd: Round, code: AlertCode) -> None:
        minimum, limit = self.profile.min_bet, self.profile.max_bet
        if code is AlertCode.BANKER_BET_MULTIPLE:
            patron, seat = self._someone(seated=False)
            spot, amount = Spot.BANKER, 2 * minimum + minimum // 2
            what = f"a Banker bet of {amount}, not a multiple of the table minimum {minimum}"
        elif code is AlertCode.BET_BELOW_MINIMUM:
            patron, seat = self._someone(seated=False)
            spot, amount = Spot.PLAYER, minimum // 2
            what = f"a Player bet of {amount}, below the table minimum {minimum}"
        else:
            patron, seat = self._someone(seated=True)
            totals = money.spot_totals((b.spot, b.amount) for b in rnd.active_bets())
            spot, amount = Spot.BANKER, ((limit + totals[Spot.PLAYER] - totals[Spot.BANKER]) // minimum + 1) * minimum
            what = f"a Banker bet of {amount}, leaving more than the table limit {limit} between Banker and Player (Art. 14)"
        bet = self._place(rnd, patron, seat, spot, amount, check=False)
        assert bet is not None
        self._label(code, shoe, f"Patron {patron} placed {what}.", rnd, patron_id=patron, bet_id=bet.bet_id)

    def _late_bet(self, shoe: DealingShoe, rnd: Round) -> bool:
        patron, seat = self._someone(seated=False)
        bet = self._place(rnd, patron, seat, Spot.PLAYER, self.profile.min_bet, check=False)
        assert bet is not None
        self._label(
            AlertCode.LATE_BET,
            shoe,
            f"Patron {patron} placed a Player bet of {bet.amount} after bets closed.",
            rnd,
            patron_id=patron,
            bet_id=bet.bet_id,
        )
        return True

    # ---- the cards --------------------------------------------------------------------------------

    def _foreign_card(self, shoe: DealingShoe, rnd: Round) -> bool:
        """Slip into the shoe, as the next card, a copy of a card whose genuine copies are all out."""
        counts = Counter(card.code for card in shoe.cards[: shoe.pos])
        all_out = sorted(code for code, count in counts.items() if count >= self.profile.decks)
        if not all_out:
            return False
        card = CARDS[self.rng.choice(all_out)]
        shoe.cards.insert(shoe.pos, card)
        if not shoe.cut_out and shoe.cut >= shoe.pos:
            shoe.cut += 1  # the cut card lies below the slipped card
        self._label(
            AlertCode.CARD_OVERCOUNT,
            shoe,
            f"A foreign {card.code} was slipped into the shoe and dealt as card {shoe.pos + 1}; "
            f"all {self.profile.decks} genuine copies were already out.",
            rnd,
        )
        return True

    def _first_four(self, shoe: DealingShoe) -> tuple[int, int]:
        cards = shoe.cards[shoe.pos : shoe.pos + 4]
        return hand_total([cards[0], cards[2]]), hand_total([cards[1], cards[3]])

    def _can_deal_wrong(self, shoe: DealingShoe, error: AlertCode) -> bool:
        """Whether the next round's cards allow this dealing error as the only irregularity."""
        if error not in DRAW_ERRORS:
            return True
        player_two, banker_two = self._first_four(shoe)
        natural = player_two >= 8 or banker_two >= 8
        player_draws = PLAYER_DRAWS[player_two][banker_two]
        if error is AlertCode.DRAW_PLAYER_MISSING:
            return player_draws
        if error is AlertCode.DRAW_PLAYER_EXTRA:
            return not natural and not player_draws
        third = shoe.cards[shoe.pos + 4] if player_draws else None
        banker_draws = banker_rule(banker_two, player_two, third).draws
        return banker_draws if error is AlertCode.DRAW_BANKER_MISSING else not natural and not banker_draws

    def _pick_error(self, shoe: DealingShoe) -> AlertCode | None:
        possible = [error for error in DRAW_ERRORS if self._can_deal_wrong(shoe, error)]
        return self.rng.choice(possible) if possible else None

    def _place_card(self, hand: str, index: int, card: Card, box_saw: bool) -> None:
        self._advance(600, 1_000)
        data = models.CardPlaceInput(table_id=self.table_id, hand=hand, index=index, card=card.code if box_saw else None)  # type: ignore[arg-type]
        self._input(models.CardPlace, data, "hand-box")

    def _void(self, shoe: DealingShoe, rnd: Round) -> None:
        """Art. 10 misapplied: the console voids a round dealt by the rules so far (its first four
        cards, P, B, P, B), with no misdeal in it; its stakes go back."""
        for hand in ("player", "banker", "player", "banker"):
            index, card = self._draw(shoe)
            self._place_card(hand, index, card, self.box_sees_cards)
        self._advance(3_000, 8_000)
        reason = self.rng.choice(("dealer's call", "supervisor's call", "disputed round"))
        self._input(models.RoundVoid, models.RoundVoidInput(table_id=self.table_id, reason=reason), "console")
        self.carried = {}  # Art. 10: every stake back, carried ones too
        self._label(
            AlertCode.ROUND_VOIDED,
            shoe,
            f"The console voided the round after its first four cards, dealt by the rules, with no misdeal in it "
            f"({reason!r}): stakes of {rnd.staked()} were returned (Art. 10).",
            rnd,
        )

    def _deal(self, shoe: DealingShoe, rnd: Round, error: AlertCode | None, wrong_holder: bool) -> RoundResult:
        """Art. 7 and 9, with at most one dealing error. The dealer goes by the cards on the table,
        so after an error the rest of the round is played by the rules."""
        order = ("banker", "player", "banker", "player") if error is AlertCode.DEAL_ORDER else ("player", "banker", "player", "banker")
        hands: dict[str, list[Card]] = {"player": [], "banker": []}
        detail = ""
        for slot, hand in enumerate(order):
            if error is AlertCode.CARD_UNACCOUNTED and slot == 2:
                index, card = self._draw(shoe)
                detail = f" ({card.code}, card {index})"
            if error is AlertCode.BURN_MID_ROUND and slot == 1:
                index, card = self._draw(shoe)
                self._advance(500, 1_500)
                self._input(models.CardsBurn, models.CardsBurnInput(table_id=self.table_id, indices=[index]), "console")
                detail = f" (the {card.code}, card {index}, after the Player's first card)"
            if error is AlertCode.CARD_REUSED and slot == 0:
                index, card = self.start_burn[-1]  # brought back, not drawn: the shoe reads nothing
                self._place_card(hand, index, card, self.box_sees_cards)
                hands[hand].append(card)
                detail = f": the {card.code}, card {index}, burned at the shoe's start"
                continue
            index, card = self._draw(shoe, face_up=error is AlertCode.CARD_EXPOSED and slot == 0)
            shown = card
            if error is AlertCode.CARD_MISMATCH and slot == 2:
                shown = self.rng.choice([c for c in DECK if c.rank is not card.rank])
                detail = f": the shoe read {card.code} as card {index}, the hand box saw {shown.code}"
            if error is AlertCode.CARD_EXPOSED and slot == 0:
                detail = f" ({card.code}, card {index})"
            self._place_card(hand, index, shown, box_saw=self.box_sees_cards or shown is not card)
            hands[hand].append(shown)
        self._squeeze(shoe, rnd, wrong_holder)
        player_two, banker_two = hand_total(hands["player"]), hand_total(hands["banker"])
        player_draws = PLAYER_DRAWS[player_two][banker_two] != (error in (AlertCode.DRAW_PLAYER_MISSING, AlertCode.DRAW_PLAYER_EXTRA))
        third = None
        if player_draws:
            index, third = self._draw(shoe)
            self._place_card("player", index, third, self.box_sees_cards)
            hands["player"].append(third)
        banker_draws = banker_rule(banker_two, player_two, third).draws != (
            error in (AlertCode.DRAW_BANKER_MISSING, AlertCode.DRAW_BANKER_EXTRA)
        )
        if banker_draws:
            index, card = self._draw(shoe)
            self._place_card("banker", index, card, self.box_sees_cards)
            hands["banker"].append(card)
        if error is not None:
            self._label(error, shoe, _ERROR_SENTENCES[error] + detail + ".", rnd)
        return result_of(hands["player"], hands["banker"])

    def _squeeze(self, shoe: DealingShoe, rnd: Round, wrong_holder: bool) -> None:
        """Art. 16: where the house allows it, the seated bettor with the largest bet (as the house
        reads it) may hold the cards."""
        groups = squeeze_stakes(rnd, self.profile.squeeze_holder)
        entitled = [patron for seated in groups.values() for patron, stake in seated.items() if stake == max(seated.values())]
        if wrong_holder:
            holder, _ = self._someone(seated=False)
            why = (
                "the house does not allow squeezing"
                if not self.profile.squeeze_allowed
                else "only the seated bettor with the largest stake may"
            )
            self._label(
                AlertCode.SQUEEZE_HOLDER,
                shoe,
                f"Standing patron {holder} held (squeezed) the cards, but {why} (Art. 16).",
                rnd,
                patron_id=holder,
            )
        elif self.profile.squeeze_allowed and entitled and self.rng.random() < 0.4:
            holder = entitled[0]
        else:
            return
        self._advance(1_000, 3_000)
        self._input(models.Squeeze, models.SqueezeInput(table_id=self.table_id, patron_id=holder), "console")

    # ---- settlement -------------------------------------------------------------------------------

    def _tamper(self, shoe: DealingShoe, rnd: Round, code: AlertCode, declared: RoundResult) -> bool:
        """Order a settlement fault for one of the round's bets (done to the settlement events)."""
        payouts = self.profile.commission, self.profile.commission_rounding
        settled = [(bet, money.settle(bet.spot, bet.amount, declared, *payouts)) for bet in rnd.active_bets()]
        if code is AlertCode.PAYOUT_MISMATCH:
            candidates = [bet for bet, s in settled if s.result is BetResult.WIN]
            what = f"was paid {OVERPAID} more than the rules give"
        else:
            candidates = [bet for bet, s in settled if s.result is not BetResult.CARRIED]
            what = "was never settled" if code is AlertCode.UNSETTLED_BET else "was settled twice"
        if not candidates:
            return False
        bet = self.rng.choice(candidates)
        self.out.append(Tamper(self.clock, self.table_id, code, rnd.round_id, bet.bet_id))
        self._label(
            code,
            shoe,
            f"Bet {bet.bet_id} ({bet.spot} {bet.amount}) of patron {bet.patron_id} {what}.",
            rnd,
            patron_id=bet.patron_id,
            bet_id=bet.bet_id,
        )
        return True


OVERPAID = 100  # what a tampered settlement pays too much

# Where the cut card goes for the shoe injections that move it: at least 8 cards behind it, so
# that it always comes out before the shoe is too short for another round.
_CARDS_BEHIND_CUT = {AlertCode.CUT_CARD_DEPTH: (8, 11), AlertCode.ROUNDS_AFTER_CUT_CARD: (40, 60)}

_SHOE_SENTENCES = {
    AlertCode.CUT_CARD_DEPTH: "The cut card was inserted with only {behind} cards behind it (Art. 2.1: at least about 12).",
    AlertCode.CUT_CARD_MISSING: "No cut card was put in the shoe, and the shoe was dealt to its last rounds (Art. 2.1, 3).",
    AlertCode.OUTCOME_DRIFT: "The shoe was stacked so that the Banker wins about 85% of its rounds.",
    AlertCode.SHOE_REPEAT: f"Cards 41-{40 + REPEAT_RUN} of this shoe repeat cards 31-{30 + REPEAT_RUN} of the table's previous shoe {{previous}} (a false shuffle).",
}

_DEALING_ERRORS = frozenset(
    {
        *DRAW_ERRORS,
        AlertCode.DEAL_ORDER,
        AlertCode.CARD_MISMATCH,
        AlertCode.CARD_UNACCOUNTED,
        AlertCode.CARD_EXPOSED,
        AlertCode.CARD_REUSED,
        AlertCode.BURN_MID_ROUND,
    }
)

_ERROR_SENTENCES = {
    AlertCode.DRAW_PLAYER_MISSING: "The Player stood where Art. 9(1) made it draw a third card; the Banker then played by the rules",
    AlertCode.DRAW_PLAYER_EXTRA: "The Player drew a third card where Art. 9(2) made it stand; the Banker then played by the rules",
    AlertCode.DRAW_BANKER_MISSING: "The Banker stood where Art. 9(3) made it draw a third card",
    AlertCode.DRAW_BANKER_EXTRA: "The Banker drew a third card where Art. 9(4) made it stand",
    AlertCode.DEAL_ORDER: "The first four cards were dealt Banker, Player, Banker, Player instead of Player first (Art. 7)",
    AlertCode.CARD_MISMATCH: "The Player's second card was switched",
    AlertCode.CARD_UNACCOUNTED: "A card came out of the shoe between the second and third cards and went into no hand, unburned",
    AlertCode.CARD_EXPOSED: "The round's first card came out of the shoe face up (Art. 4: play continues)",
    AlertCode.CARD_REUSED: "The Player's first card was not drawn from the shoe but brought back into play (Art. 2, 8)",
    AlertCode.BURN_MID_ROUND: "The dealer burned a card in the middle of the round (Art. 8: only at a round's start)",
}
