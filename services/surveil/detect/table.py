"""One table under watch: its shoe, rounds, bets and settlements, rebuilt from the three streams
and checked against the rules core.

The watch is fed one event at a time, from any of ``baccarat.shoe``, ``baccarat.table`` and
``baccarat.settlement``. Those are separate topics, so live their events interleave differently
than in a recorded log; every check therefore waits until the events it needs have arrived on
each stream, and its result depends only on each stream's own order. Live and offline replay
raise the same alerts:

- a round is checked once it completed on the table stream *and* the shoe stream has read every
  card in its hands (or finished the shoe);
- a settlement is checked once its round completed on the table stream;
- a shoe's loose ends (cards neither burned nor dealt) are checked once the shoe ended on the
  shoe stream *and* the table stream moved on to another shoe (or the input ended).

The state is msgspec structs, so the live service can keep it in a changelog-backed table.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec

from ..core import money, procedure
from ..core.cards import CARDS
from ..core.findings import AlertCode, Finding
from ..core.money import BetResult, Settlement, Spot
from ..core.play import DealtCard, Outcome, RoundResult, check_play
from ..core.profiles import HouseProfile, load_profile
from ..core.shoe import ShoeComposition
from ..events import models as m
from . import patterns
from .alerts import Context

RECENT_ROUNDS = 12  # rounds kept after they are fully checked and settled
_NOTHING: tuple[list[Raised], list[Fact]] = ([], [])  # what most events yield; never mutated


class Bet(msgspec.Struct):
    bet_id: str
    patron_id: str
    seat: str
    spot: Spot
    amount: int
    carried: tuple[Spot, int] | None = None  # spot and amount when carried over from a tie
    withdrawn: bool = False


SettlementEvent = m.BetSettled | m.RoundSettled


class Round(msgspec.Struct):
    round_id: str
    round_no: int
    shoe_id: str
    dealer_id: str
    profile: str
    demo: bool
    min_bet: int
    max_bet: int
    bets: dict[str, Bet] = {}
    closed: bool = False
    completed: m.RoundCompletedData | None = None
    voided: bool = False
    checked: bool = False  # the cards were checked against the shoe and the rules
    demo_bets_flagged: bool = False
    settled: dict[str, str] = {}  # bet id -> id of the bet.settled event that settled it
    settled_totals: list[int] = msgspec.field(
        default_factory=lambda: [0, 0, 0, 0]
    )  # as RoundTotals  # staked, paid_out, commission, house_net from bet.settled
    round_settled: bool = False
    waiting_settlements: list[SettlementEvent] = []

    @property
    def ended(self) -> bool:
        return self.completed is not None or self.voided

    def active_bets(self) -> list[Bet]:
        return [bet for bet in self.bets.values() if not bet.withdrawn]

    def staked(self) -> int:
        return sum(bet.amount for bet in self.active_bets())

    def result(self) -> RoundResult | None:
        c = self.completed
        if c is None:
            return None
        return RoundResult(c.player_total, c.banker_total, c.outcome, c.player_pair, c.banker_pair)


class Shoe(msgspec.Struct):
    """A shoe as both streams tell of it: the table stream may mention it (burns, rounds) before
    the shoe stream has started it, so what the shoe stream brings is filled in at its start."""

    shoe_id: str
    started: bool = False
    decks: int = 0
    automatic: bool = False
    composition: ShoeComposition | None = None
    reads: dict[int, str] = {}
    last_index: int = 0
    ended: bool = False
    cut_index: int | None = None
    burned: dict[int, str] = {}  # index -> round id ("" at the shoe's start)
    dealt: dict[int, str] = {}  # index -> round id
    start_burn_checked: bool = False
    accounted_upto: int = 0  # every card read up to this index is burned, dealt, or reported
    round_spans: list[tuple[int, int]] = []  # first and last hand index of each checked round
    demo_rounds: int = 0
    outcomes: list[int] = msgspec.field(default_factory=lambda: [0, 0, 0])  # Banker, Player, Tie of its checked, non-demo rounds
    winnower: patterns.Winnower = msgspec.field(default_factory=patterns.Winnower)
    repeat_flagged: bool = False
    finalized: bool = False


class TableState(msgspec.Struct):
    table_id: str
    shoes: dict[str, Shoe] = {}
    shoe_order: list[str] = []  # in the order first heard of
    finished_shoes: list[str] = []  # recently finalized, so late events do not bring them back
    table_shoe: str | None = None  # the shoe of the latest round.opened
    rounds: dict[str, Round] = {}
    round_order: list[str] = []
    current_round: str | None = None
    unchecked: list[str] = []  # completed rounds waiting for the shoe stream, in order
    settlement_seen: bool = False
    orphan_settlements: list[SettlementEvent] = []  # for rounds the table stream has not opened (yet)
    earlier_fingerprints: list[list[int]] = []  # winnowed runs of earlier shoes, newest last
    shoe_outcome_history: list[list[int]] = []  # Banker/Player/Tie counts of earlier shoes
    drift_tests: int = 0
    # Digests (id_digest) of the ids of the table's last RECENT_IDS events, end to end: a ring once
    # full, its oldest at recent_next, written over in place rather than the 8 KB copied for every
    # event. A window stored oldest first, as before the ring, is a ring at 0.
    recent_digests: bytearray = msgspec.field(default_factory=bytearray)
    recent_next: int = 0


# An event whose id the table saw among its last RECENT_IDS events is that event delivered again:
# a copy from a transaction its producer aborted and then committed again (after a broker restart
# or a kill -9), a producer's retry, a log recorded twice. Far more than one producer batch of
# one table, so the copy is always still in the window.
RECENT_IDS = 1024
# Kept as 8-byte digests, not the ids: the window is stored with the table's state at every commit,
# and half that state was ids. Two ids of a table's last 1,024 events share a digest once in ~10^16.
DIGEST_SIZE = 8


# A copy of a fresh hasher is the same hasher, made in half the time of a new one (whose keyword
# arguments are parsed each time); id_digest runs for every event.
_NEW_HASHER = hashlib.blake2b(digest_size=DIGEST_SIZE)


def id_digest(event_id: str) -> bytes:
    hasher = _NEW_HASHER.copy()
    hasher.update(event_id.encode())
    return hasher.digest()


def _in_window(window: bytes | bytearray, digest: bytes) -> bool:
    at = window.find(digest)
    while at != -1 and at % DIGEST_SIZE:  # a match across two digests is not one
        at = window.find(digest, at + 1)
    return at != -1


@dataclass(frozen=True, slots=True)
class Raised:
    """A finding with where it belongs, and the time of the event that revealed it."""

    finding: Finding
    context: Context
    time: datetime


class PatronBet(msgspec.Struct, frozen=True, tag=True):
    """A decided Player/Banker bet, for the patron win-rate chart (keyed by patron)."""

    patron_id: str
    table_id: str
    round_id: str
    bet_id: str
    won: bool
    amount: int
    time: datetime

    @property
    def key(self) -> str:
        return f"patron:{self.patron_id}"


class DealerRound(msgspec.Struct, frozen=True, tag=True):
    """A round a dealer dealt, and its dealing errors, for the dealer error chart (keyed by dealer)."""

    dealer_id: str
    table_id: str
    round_id: str
    errors: tuple[str, ...]
    time: datetime

    @property
    def key(self) -> str:
        return f"dealer:{self.dealer_id}"


Fact = PatronBet | DealerRound

# Looked up once: on Python 3.11 each ``Spot.PLAYER``-style lookup costs about 0.2 µs, and
# _patron_facts asks for every bet of every round.
_DECIDED_SPOTS = frozenset({Spot.PLAYER, Spot.BANKER})
_WINNING_SPOT = {Outcome.PLAYER: Spot.PLAYER, Outcome.BANKER: Spot.BANKER}
_TIE = Outcome.TIE

# Findings that reflect on the dealer who ran the round.
DEALER_CODES = frozenset(
    {
        AlertCode.DRAW_PLAYER_MISSING,
        AlertCode.DRAW_PLAYER_EXTRA,
        AlertCode.DRAW_BANKER_MISSING,
        AlertCode.DRAW_BANKER_EXTRA,
        AlertCode.DEAL_ORDER,
        AlertCode.RESULT_MISMATCH,
        AlertCode.CARD_UNACCOUNTED,
        AlertCode.LATE_BET,
        AlertCode.SQUEEZE_HOLDER,
    }
)


class TableWatch:
    """Feeds one table's events through the checks; ``feed`` returns what it found."""

    def __init__(self, state: TableState, profile_override: str | None = None) -> None:
        self.state = state
        self.profile_override = profile_override
        self.raised: list[Raised] = []
        self.facts: list[Fact] = []
        self.rounds_checked = 0
        self._last_time: datetime | None = None
        # The window's digests as a set, for a watch fed one event after another from an empty
        # window (Floor, offline replay): a set lookup instead of a scan of 8 KB. Good while this
        # watch alone changes the window: the Floor's, one per table; the live service makes a
        # watch per event over a stored window, and scans it.
        self._digests: set[bytes] | None = None if state.recent_digests else set()
        self._indexed = state.recent_digests

    # ---- entry points -------------------------------------------------------------------------

    def feed(self, event: m.Event) -> tuple[list[Raised], list[Fact]]:
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            if self._seen_before(event.id):
                return _NOTHING
            self._last_time = event.time  # what ``flush`` dates its findings by
            handler(self, event)
        if self.raised or self.facts:
            return self._take()
        return _NOTHING

    def _seen_before(self, event_id: str) -> bool:
        """Whether the table's last RECENT_IDS events include this id; if not, it joins them."""
        digest, state = id_digest(event_id), self.state
        window = state.recent_digests
        digests = self._digests = self._digests if window is self._indexed else None
        if digest in digests if digests is not None else _in_window(window, digest):
            return True
        if len(window) < RECENT_IDS * DIGEST_SIZE:
            window += digest
        else:  # the oldest digest makes way (none is there twice)
            at = state.recent_next * DIGEST_SIZE
            if digests is not None:
                digests.discard(bytes(window[at : at + DIGEST_SIZE]))
            window[at : at + DIGEST_SIZE] = digest
            state.recent_next = (state.recent_next + 1) % RECENT_IDS
        if digests is not None:
            digests.add(digest)
        return False

    def flush(self) -> tuple[list[Raised], list[Fact]]:
        """The input ended: check what still waits for events that will not come."""
        time = self._last_time
        if time is not None:
            for round_id in self.state.unchecked:
                self._check_round(self.state.rounds[round_id], time)
            self.state.unchecked = []
            for shoe_id in list(self.state.shoe_order):
                shoe = self.state.shoes[shoe_id]
                if shoe.ended:
                    self._finalize_shoe(shoe, time)
            for event in self.state.orphan_settlements:
                orphan = event.data
                what = f"bet {orphan.bet_id}" if isinstance(orphan, m.BetSettledData) else "the round"
                self._raise(
                    Finding(
                        AlertCode.PAYOUT_MISMATCH,
                        "Art. 17",
                        f"Settlement paid {what} on round {orphan.round_id}, which this table never opened.",
                        {"settlement": msgspec.to_builtins(orphan), "stake": getattr(orphan, "amount", 0)},
                    ),
                    Context(
                        self.state.table_id, f"round:{orphan.round_id}:unknown:{getattr(orphan, 'bet_id', '')}", round_id=orphan.round_id
                    ),
                    time,
                )
            self.state.orphan_settlements = []
        return self._take()

    def _take(self) -> tuple[list[Raised], list[Fact]]:
        raised, facts = self.raised, self.facts
        self.raised, self.facts = [], []
        return raised, facts

    def _raise(self, finding: Finding, context: Context, time: datetime) -> None:
        self.raised.append(Raised(finding, context, time))

    def _profile(self, rnd: Round) -> HouseProfile:
        return load_profile(self.profile_override or rnd.profile)

    def _rounds(self) -> list[Round]:
        return [self.state.rounds[r] for r in self.state.round_order]

    def _round_context(self, rnd: Round, scope: str = "", **extra: str | None) -> Context:
        return Context(
            table_id=self.state.table_id,
            scope=f"round:{rnd.round_id}{scope}",
            shoe_id=rnd.shoe_id,
            round_id=rnd.round_id,
            dealer_id=rnd.dealer_id,
            **extra,  # type: ignore[arg-type]
        )

    # ---- the shoe stream ----------------------------------------------------------------------

    def _shoe(self, shoe_id: str) -> Shoe | None:
        """The shoe, heard of first from either stream; None once it is finalized."""
        shoe = self.state.shoes.get(shoe_id)
        if shoe is None and shoe_id not in self.state.finished_shoes:
            shoe = self.state.shoes[shoe_id] = Shoe(shoe_id)
            self.state.shoe_order.append(shoe_id)
        return shoe

    def _table_stream_left(self, shoe_id: str) -> bool:
        """Whether the table stream is on a later shoe (in the order the shoes were first heard
        of): no round of this one is to come. Not merely another shoe: the table stream may be a
        shoe or more behind the shoe stream (as a worker restarted after a broker restart reads them)."""
        order = self.state.shoe_order
        return self.state.table_shoe in order and order.index(self.state.table_shoe) > order.index(shoe_id)

    def _started_shoe(self, shoe_id: str) -> Shoe | None:
        shoe = self.state.shoes.get(shoe_id)
        return shoe if shoe is not None and shoe.started else None

    def _shoe_started(self, event: m.ShoeStarted) -> None:
        d = event.data
        shoe = self._shoe(d.shoe_id)
        if shoe is None or shoe.started:
            return  # redelivered
        shoe.started, shoe.decks, shoe.automatic = True, d.decks, d.automatic
        shoe.composition = ShoeComposition(d.decks)

    def _card_read(self, event: m.CardRead) -> None:
        d = event.data
        shoe = self._started_shoe(d.shoe_id)
        if shoe is None or d.index in shoe.reads:
            return  # no shoe.started seen, or a redelivered read
        assert shoe.composition is not None
        shoe.reads[d.index] = d.card
        shoe.last_index = max(shoe.last_index, d.index)
        if not shoe.composition.take(d.card):
            count = shoe.composition.copies_seen(d.card)
            self._raise(
                Finding(
                    AlertCode.CARD_OVERCOUNT,
                    "Art. 1",
                    f"Copy {count} of the {d.card} came out of a {shoe.decks}-deck shoe: a foreign card is in play.",
                    {"card": d.card, "index": d.index, "copies_seen": count, "decks": shoe.decks},
                ),
                self._card_context(shoe, d.index),
                event.time,
            )
        if d.face_up:
            self._raise(
                Finding(
                    AlertCode.CARD_EXPOSED,
                    "Art. 4",
                    f"The {d.card} (card {d.index}) came out of the shoe face up; the round and its bets stay valid.",
                    {"card": d.card, "index": d.index},
                ),
                self._card_context(shoe, d.index),
                event.time,
            )
        self._fingerprint(shoe, d.card, d.index, event.time)
        self._check_ready_rounds(event.time)

    def _card_context(self, shoe: Shoe, index: int) -> Context:
        return Context(self.state.table_id, f"shoe:{shoe.shoe_id}:{index}", shoe_id=shoe.shoe_id)

    def _cut_card(self, event: m.CutCardReached) -> None:
        d = event.data
        shoe = self._started_shoe(d.shoe_id)
        if shoe is None or shoe.cut_index is not None:
            return
        shoe.cut_index = d.index
        if shoe.automatic:
            return  # Art. 2.3: no cut card procedure with an automatic machine
        finding = procedure.check_cut_card(shoe.decks, d.index)
        if finding:
            self._raise(finding, Context(self.state.table_id, f"shoe:{shoe.shoe_id}:cut", shoe_id=shoe.shoe_id), event.time)

    def _shoe_ended(self, event: m.ShoeEnded) -> None:
        shoe = self._started_shoe(event.data.shoe_id)
        if shoe is None:
            return
        shoe.ended = True
        self._check_ready_rounds(event.time)
        if self._table_stream_left(shoe.shoe_id):
            self._finalize_shoe(shoe, event.time)

    # ---- the table stream ---------------------------------------------------------------------

    def _round_opened(self, event: m.RoundOpened) -> None:
        d = event.data
        if d.round_id in self.state.rounds:
            return
        previous_round = self.state.rounds.get(self.state.current_round or "")
        rnd = Round(
            round_id=d.round_id,
            round_no=d.round_no,
            shoe_id=d.shoe_id,
            dealer_id=d.dealer_id,
            profile=d.profile,
            demo=d.demo,
            min_bet=d.min_bet,
            max_bet=d.max_bet,
        )
        if previous_round is not None and previous_round.completed is not None:
            for bet_id in d.carried_bet_ids:
                bet = previous_round.bets.get(bet_id)
                if bet is not None and not bet.withdrawn:
                    rnd.bets[bet_id] = Bet(bet.bet_id, bet.patron_id, bet.seat, bet.spot, bet.amount, carried=(bet.spot, bet.amount))
        self.state.rounds[d.round_id] = rnd
        self.state.round_order.append(d.round_id)
        if self.state.orphan_settlements:
            rnd.waiting_settlements = [o for o in self.state.orphan_settlements if o.data.round_id == d.round_id]
            self.state.orphan_settlements = [o for o in self.state.orphan_settlements if o.data.round_id != d.round_id]
        self.state.current_round = d.round_id
        shoe = self._shoe(d.shoe_id)
        if self.state.table_shoe != d.shoe_id:
            self.state.table_shoe = d.shoe_id
            for shoe_id in list(self.state.shoe_order):
                earlier = self.state.shoes[shoe_id]
                if earlier.ended and self._table_stream_left(shoe_id):
                    self._finalize_shoe(earlier, event.time)
        if shoe is None:
            return
        if d.demo:
            shoe.demo_rounds += 1
            for finding in procedure.check_demo_round(shoe.demo_rounds, 0):
                self._raise(finding, self._round_context(rnd), event.time)
        self._trim_rounds()

    def _bet_placed(self, event: m.BetPlaced) -> None:
        d = event.data
        rnd = self.state.rounds.get(d.round_id)
        if rnd is None or d.bet_id in rnd.bets:
            return
        rnd.bets[d.bet_id] = Bet(d.bet_id, d.patron_id, d.seat, d.spot, d.amount)
        self._after_bet_move(rnd, rnd.bets[d.bet_id], event.time, "placed")

    def _bet_changed(self, event: m.BetChanged) -> None:
        d = event.data
        rnd = self.state.rounds.get(d.round_id)
        bet = rnd.bets.get(d.bet_id) if rnd else None
        if rnd is None or bet is None:
            return
        if bet.carried is not None:
            self._check_tie_change(rnd, bet, (d.spot, d.amount), event.time)
        bet.spot, bet.amount = d.spot, d.amount
        self._after_bet_move(rnd, bet, event.time, "changed")

    def _bet_withdrawn(self, event: m.BetWithdrawn) -> None:
        d = event.data
        rnd = self.state.rounds.get(d.round_id)
        bet = rnd.bets.get(d.bet_id) if rnd else None
        if rnd is None or bet is None or bet.withdrawn:
            return
        if bet.carried is not None:
            self._check_tie_change(rnd, bet, None, event.time)
        bet.withdrawn = True
        self._after_bet_move(rnd, bet, event.time, "withdrawn")

    def _after_bet_move(self, rnd: Round, bet: Bet, time: datetime, verb: str) -> None:
        if rnd.demo and not rnd.demo_bets_flagged:
            rnd.demo_bets_flagged = True
            for finding in procedure.check_demo_round(0, 1):
                self._raise(finding, self._round_context(rnd, ":bets"), time)
        if rnd.closed or rnd.ended:
            context = self._round_context(rnd, f":bet:{bet.bet_id}:{verb}", bet_id=bet.bet_id, patron_id=bet.patron_id)
            self._raise(
                Finding(
                    AlertCode.LATE_BET,
                    "Art. 13",
                    f"A {bet.spot} bet of {bet.amount} by patron {bet.patron_id} was {verb} after bets closed.",
                    {"bet_id": bet.bet_id, "spot": str(bet.spot), "amount": bet.amount, "action": verb, "stake": bet.amount},
                ),
                context,
                time,
            )
            if rnd.closed and verb != "withdrawn":
                self._check_amount(rnd, bet, time)

    def _check_tie_change(self, rnd: Round, bet: Bet, after: tuple[Spot, int] | None, time: datetime) -> None:
        assert bet.carried is not None
        before = bet.carried  # judged against the bet as the tie left it
        profile = self._profile(rnd)
        for finding in money.check_tie_change(before, after, profile.after_tie, profile.name):
            context = self._round_context(rnd, f":tie:{bet.bet_id}", bet_id=bet.bet_id, patron_id=bet.patron_id)
            finding.evidence["stake"] = bet.amount
            self._raise(finding, context, time)

    def _check_amount(self, rnd: Round, bet: Bet, time: datetime) -> None:
        for finding in money.check_amount(bet.spot, bet.amount, rnd.min_bet):
            finding.evidence["stake"] = bet.amount
            self._raise(finding, self._round_context(rnd, f":bet:{bet.bet_id}", bet_id=bet.bet_id, patron_id=bet.patron_id), time)

    def _bets_closed(self, event: m.BetsClosed) -> None:
        rnd = self.state.rounds.get(event.data.round_id)
        if rnd is None or rnd.closed:
            return
        rnd.closed = True
        active = rnd.active_bets()
        for bet in active:
            self._check_amount(rnd, bet, event.time)
        totals = money.spot_totals((bet.spot, bet.amount) for bet in active)
        for ordinal, finding in enumerate(money.check_table_limit(totals, rnd.max_bet)):
            finding.evidence["stake"] = sum(totals.values())
            self._raise(finding, self._round_context(rnd, f":limit:{ordinal}"), event.time)

    def _cards_burned(self, event: m.CardsBurned) -> None:
        d = event.data
        shoe = self._shoe(d.shoe_id)
        if shoe is None:
            return
        for index in d.indices:
            shoe.burned.setdefault(index, d.round_id or "")

    def _round_completed(self, event: m.RoundCompleted) -> None:
        d = event.data
        rnd = self.state.rounds.get(d.round_id)
        if rnd is None or rnd.ended:
            return
        rnd.completed = d
        self.state.unchecked.append(rnd.round_id)
        self._squeeze(rnd, event.time)
        self._patron_facts(rnd, event.time)
        self._check_ready_rounds(event.time)
        self._settle_waiting(rnd, event.time)

    def _round_voided(self, event: m.RoundVoided) -> None:
        rnd = self.state.rounds.get(event.data.round_id)
        if rnd is None or rnd.ended:
            return
        rnd.voided = True
        rnd.checked = True  # Art. 10: a voided round's cards are burned, not judged
        self._settle_waiting(rnd, event.time)

    def _squeeze(self, rnd: Round, time: datetime) -> None:
        assert rnd.completed is not None
        stakes: dict[str, int] = {}
        for bet in rnd.active_bets():
            if bet.seat != "standing":
                stakes[bet.patron_id] = stakes.get(bet.patron_id, 0) + bet.amount
        finding = money.check_squeeze(rnd.completed.squeezed_by, stakes, self._profile(rnd).squeeze_allowed)
        if finding:
            finding.evidence["stake"] = rnd.staked()
            self._raise(finding, self._round_context(rnd, patron_id=rnd.completed.squeezed_by), time)

    def _patron_facts(self, rnd: Round, time: datetime) -> None:
        c = rnd.completed
        if c is None or rnd.demo or c.outcome is _TIE:
            return
        winner = _WINNING_SPOT[c.outcome]
        for bet in rnd.active_bets():
            if bet.spot in _DECIDED_SPOTS:
                won = bet.spot == winner
                self.facts.append(PatronBet(bet.patron_id, self.state.table_id, rnd.round_id, bet.bet_id, won, bet.amount, time))

    # ---- round checks (need both streams) -----------------------------------------------------

    def _check_ready_rounds(self, time: datetime) -> None:
        """Check, in order, the completed rounds whose cards the shoe stream has all read."""
        waiting = self.state.unchecked
        while waiting:
            rnd = self.state.rounds[waiting[0]]
            assert rnd.completed is not None
            shoe = self.state.shoes.get(rnd.shoe_id)
            needed = max((c.index for c in (*rnd.completed.player, *rnd.completed.banker)), default=0)
            if shoe is not None and not (shoe.started and (shoe.ended or shoe.last_index >= needed)):
                return
            waiting.pop(0)
            self._check_round(rnd, time)

    def _check_round(self, rnd: Round, time: datetime) -> None:
        c = rnd.completed
        assert c is not None
        rnd.checked = True
        self.rounds_checked += 1
        shoe = self._started_shoe(rnd.shoe_id)
        found: list[Finding] = []
        player = [DealtCard(x.index, CARDS[x.card]) for x in c.player]
        banker = [DealtCard(x.index, CARDS[x.card]) for x in c.banker]
        found += check_play(player, banker, RoundResult(c.player_total, c.banker_total, c.outcome, c.player_pair, c.banker_pair))
        if shoe is not None:
            if not shoe.start_burn_checked:
                shoe.start_burn_checked = True
                self._check_start_burn(shoe, rnd, time)
            found += self._check_cards_against_shoe(shoe, rnd, player, banker)
            found += self._check_after_cut(shoe, rnd, player, banker)
        stake = rnd.staked()
        counted: dict[AlertCode, int] = {}
        for finding in found:
            finding.evidence.setdefault("stake", stake)
            ordinal = counted.get(finding.code, 0)
            counted[finding.code] = ordinal + 1
            scope = f":{finding.evidence['index']}" if "index" in finding.evidence else (f"#{ordinal}" if ordinal else "")
            self._raise(finding, self._round_context(rnd, scope), time)
        errors = tuple(sorted({str(f.code) for f in found if f.code in DEALER_CODES}))
        if not rnd.demo:
            self.facts.append(DealerRound(rnd.dealer_id, self.state.table_id, rnd.round_id, errors, time))
            if shoe is not None:
                shoe.outcomes[patterns.OUTCOME_INDEX[c.outcome]] += 1

    def _check_cards_against_shoe(self, shoe: Shoe, rnd: Round, player: list[DealtCard], banker: list[DealtCard]) -> list[Finding]:
        found = []
        for hand, cards in (("Player", player), ("Banker", banker)):
            for dealt in cards:
                shoe.dealt.setdefault(dealt.index, rnd.round_id)
                read = shoe.reads.get(dealt.index)
                if read != dealt.card.code:
                    seen = f"the shoe read the {read}" if read else "the shoe never read a card there"
                    found.append(
                        Finding(
                            AlertCode.CARD_MISMATCH,
                            "Art. 7",
                            f"The {hand} hand shows the {dealt.card} as card {dealt.index}, but {seen}: a switched card.",
                            {"hand": hand.lower(), "index": dealt.index, "in_hand": dealt.card.code, "shoe_read": read},
                        )
                    )
        indices = [d.index for d in (*player, *banker)]
        if indices:
            shoe.round_spans.append((min(indices), max(indices)))
            found += self._unaccounted(shoe, up_to=max(indices))
        return found

    def _unaccounted(self, shoe: Shoe, up_to: int) -> list[Finding]:
        """Cards that left the shoe up to ``up_to`` and are neither burned nor in a hand (each
        index is looked at once)."""
        found = []
        start, shoe.accounted_upto = shoe.accounted_upto, max(shoe.accounted_upto, up_to)
        for index in range(start + 1, up_to + 1):
            card = shoe.reads.get(index)
            if card is None or index in shoe.burned or index in shoe.dealt:
                continue
            found.append(
                Finding(
                    AlertCode.CARD_UNACCOUNTED,
                    "Art. 2, 7-8",
                    f"The {card} (card {index}) left the shoe but was neither burned nor dealt to a hand.",
                    {"card": card, "index": index},
                )
            )
        return found

    def _check_after_cut(self, shoe: Shoe, rnd: Round, player: list[DealtCard], banker: list[DealtCard]) -> list[Finding]:
        """Art. 3.1, judged by shoe index: the cut card came out after ``cut_index`` cards."""
        cut = shoe.cut_index
        indices = [d.index for d in (*player, *banker)]
        if cut is None or shoe.automatic or not indices or min(indices) <= cut:
            return []
        straddled = any(first <= cut < last for first, last in shoe.round_spans)
        allowed = procedure.rounds_allowed_after_cut(self._profile(rnd).last_round, straddled)
        after = sum(1 for first, _ in shoe.round_spans if first > cut)
        finding = procedure.check_round_after_cut(self._profile(rnd).last_round, after, allowed, rnd.round_no)
        return [finding] if finding else []

    def _check_start_burn(self, shoe: Shoe, rnd: Round, time: datetime) -> None:
        if shoe.automatic:
            return  # Art. 2.3
        burned_indices = sorted(i for i, r in shoe.burned.items() if r == "")
        cards = [CARDS[shoe.reads[i]] for i in burned_indices if i in shoe.reads]
        finding = procedure.check_burn(self._profile(rnd).burn, shoe.decks, cards)
        if finding:
            self._raise(
                finding, Context(self.state.table_id, f"shoe:{shoe.shoe_id}:burn", shoe_id=shoe.shoe_id, dealer_id=rnd.dealer_id), time
            )

    def _finalize_shoe(self, shoe: Shoe, time: datetime) -> None:
        if shoe.finalized:
            return
        shoe.finalized = True
        for round_id in [r for r in self.state.unchecked if self.state.rounds[r].shoe_id == shoe.shoe_id]:
            self.state.unchecked.remove(round_id)
            self._check_round(self.state.rounds[round_id], time)
        for finding in self._unaccounted(shoe, up_to=shoe.last_index):
            self._raise(
                finding, Context(self.state.table_id, f"shoe:{shoe.shoe_id}:{finding.evidence['index']}", shoe_id=shoe.shoe_id), time
            )
        self._drift(shoe, time)
        self.state.earlier_fingerprints.append(list(shoe.winnower.selected))
        del self.state.earlier_fingerprints[: -patterns.REPEAT_SHOES_KEPT]
        del self.state.shoes[shoe.shoe_id]
        self.state.shoe_order.remove(shoe.shoe_id)
        self.state.finished_shoes = [*self.state.finished_shoes[-7:], shoe.shoe_id]

    # ---- patterns at the table ----------------------------------------------------------------

    def _fingerprint(self, shoe: Shoe, card: str, index: int, time: datetime) -> None:
        selected = shoe.winnower.add(card)
        if selected is None or shoe.repeat_flagged:
            return
        for age, earlier in enumerate(reversed(self.state.earlier_fingerprints), start=1):
            if selected in earlier:
                shoe.repeat_flagged = True
                self._raise(
                    Finding(
                        AlertCode.SHOE_REPEAT,
                        "Art. 2.1",
                        f"Cards up to card {index} of this shoe repeat a run of {patterns.REPEAT_K}+ cards from the "
                        f"shoe {age} before at this table: a false shuffle or a pre-arranged slug.",
                        {"index": index, "run": list(shoe.winnower.recent_cards), "shoes_back": age},
                    ),
                    Context(self.state.table_id, f"shoe:{shoe.shoe_id}:repeat", shoe_id=shoe.shoe_id),
                    time,
                )
                return

    def _drift(self, shoe: Shoe, time: datetime) -> None:
        history = self.state.shoe_outcome_history
        history.append(list(shoe.outcomes))
        del history[: -patterns.DRIFT_TABLE_SHOES]
        window = [sum(counts[i] for counts in history) for i in range(3)]
        tests = [(f"shoe:{shoe.shoe_id}", shoe.outcomes)]
        if len(history) > 1:  # with one shoe the window is that shoe
            tests.append((f"table-window:{shoe.shoe_id}", window))
        for scope, observed in tests:
            n = sum(observed)
            if n < patterns.DRIFT_MIN_ROUNDS:
                continue
            self.state.drift_tests += 1
            statistic = patterns.chi_square(observed, shoe.decks)
            if statistic < patterns.DRIFT_THRESHOLD:
                continue
            expected = [round(n * p, 1) for p in patterns.outcome_probabilities(shoe.decks)]
            what = "this shoe" if scope.startswith("shoe") else f"the last {len(history)} shoes"
            self._raise(
                Finding(
                    AlertCode.OUTCOME_DRIFT,
                    "Art. 9-12",
                    f"Outcomes of {what} stray from the exact odds: Banker {observed[0]}, Player {observed[1]}, "
                    f"Tie {observed[2]} where {expected[0]}, {expected[1]}, {expected[2]} were expected.",
                    {
                        "rounds": n,
                        "observed": {"banker": observed[0], "player": observed[1], "tie": observed[2]},
                        "expected": {"banker": expected[0], "player": expected[1], "tie": expected[2]},
                        "chi_square": round(statistic, 2),
                        "p_value": patterns.drift_p_value(statistic),
                        "alpha": patterns.DRIFT_ALPHA,
                    },
                ),
                Context(self.state.table_id, scope, shoe_id=shoe.shoe_id),
                time,
            )

    # ---- the settlement stream ----------------------------------------------------------------

    def _settlement(self, event: m.BetSettled | m.RoundSettled) -> None:
        self.state.settlement_seen = True
        rnd = self.state.rounds.get(event.data.round_id)
        if rnd is None:
            self.state.orphan_settlements.append(event)
            return
        rnd.waiting_settlements.append(event)
        self._settle_waiting(rnd, event.time)

    def _settle_waiting(self, rnd: Round, time: datetime) -> None:
        if not rnd.ended:
            return
        waiting, rnd.waiting_settlements = rnd.waiting_settlements, []
        for event in waiting:
            if isinstance(event, m.BetSettled):
                self._check_bet_settled(rnd, event, time)
            else:
                self._check_round_settled(rnd, event.data, time)

    def _expected(self, rnd: Round, bet: Bet) -> Settlement:
        result = rnd.result()
        if rnd.voided or result is None:
            return money.VOID
        return money.settle(bet.spot, bet.amount, result, self._profile(rnd).commission)

    def _check_bet_settled(self, rnd: Round, event: m.BetSettled, time: datetime) -> None:
        d = event.data
        bet = rnd.bets.get(d.bet_id)
        first = rnd.settled.get(d.bet_id)
        if first == event.id:
            return  # the same event delivered again
        # Summed as the list it is kept as, not through a money.RoundTotals (a frozen dataclass is slow
        # to make, and this runs for every bet).
        added = money.totals_of(d.amount, money.Settlement(d.result, d.net, d.commission))
        rnd.settled_totals = [total + more for total, more in zip(rnd.settled_totals, added)]
        if first is not None:
            self._raise(
                Finding(
                    AlertCode.DUPLICATE_SETTLEMENT,
                    "Art. 17",
                    f"Bet {d.bet_id} of patron {d.patron_id} was settled again for the same round.",
                    {"bet_id": d.bet_id, "first_settlement": first, "again": event.id, "net": d.net, "stake": d.amount},
                ),
                self._round_context(rnd, f":settle:{d.bet_id}:{event.id}", bet_id=d.bet_id, patron_id=d.patron_id),
                time,
            )
            return
        rnd.settled[d.bet_id] = event.id
        if bet is None or bet.withdrawn:
            self._raise(
                Finding(
                    AlertCode.PAYOUT_MISMATCH,
                    "Art. 17",
                    f"Settlement paid bet {d.bet_id}, which the table never recorded on round {rnd.round_id}.",
                    {"bet_id": d.bet_id, "net": d.net, "stake": d.amount},
                ),
                self._settle_context(rnd, d),
                time,
            )
            return
        expected = self._expected(rnd, bet)
        seen = (d.spot, d.amount, d.result, d.net, d.commission)
        due = (bet.spot, bet.amount, expected.result, expected.net, expected.commission)
        if seen == due:
            return
        names = ("spot", "amount", "result", "net", "commission")
        differences = {
            n: {"paid": str(s) if isinstance(s, str) else s, "due": str(e) if isinstance(e, str) else e}
            for n, s, e in zip(names, seen, due)
            if s != e
        }
        article = "Art. 18" if "commission" in differences else ("Art. 12" if expected.result is BetResult.CARRIED else "Art. 17")
        self._raise(
            Finding(
                AlertCode.PAYOUT_MISMATCH,
                article,
                f"Bet {d.bet_id} ({bet.spot} {bet.amount}) was settled with net {d.net:+d} and commission "
                f"{d.commission}; the rules give {expected.net:+d} and {expected.commission}.",
                {"bet_id": d.bet_id, "differences": differences, "stake": bet.amount, "difference": d.net - expected.net},
            ),
            self._settle_context(rnd, d),
            time,
        )

    def _settle_context(self, rnd: Round, d: m.BetSettledData) -> Context:
        return self._round_context(rnd, f":settle:{d.bet_id}", bet_id=d.bet_id, patron_id=d.patron_id)

    def _check_round_settled(self, rnd: Round, d: m.RoundSettledData, time: datetime) -> None:
        if rnd.round_settled:
            return
        rnd.round_settled = True
        for earlier in self._rounds():
            if earlier is rnd:
                break
            if earlier.ended and not earlier.round_settled and earlier.completed is not None:
                self._unsettled(earlier, time)
                earlier.round_settled = True
        self._unsettled(rnd, time)
        declared = [d.staked, d.paid_out, d.commission, d.house_net]
        if declared != rnd.settled_totals:
            names = ("staked", "paid_out", "commission", "house_net")
            self._raise(
                Finding(
                    AlertCode.PAYOUT_MISMATCH,
                    "Art. 17-18",
                    f"The settlement totals of round {rnd.round_id} do not add up to its bets' settlements.",
                    {
                        "differences": {
                            n: {"declared": a, "sum_of_bets": b} for n, a, b in zip(names, declared, rnd.settled_totals) if a != b
                        },
                        "stake": rnd.staked(),
                    },
                ),
                self._round_context(rnd, ":totals"),
                time,
            )

    def _unsettled(self, rnd: Round, time: datetime) -> None:
        for bet in rnd.active_bets():
            if bet.bet_id in rnd.settled:
                continue
            due = self._expected(rnd, bet)
            self._raise(
                Finding(
                    AlertCode.UNSETTLED_BET,
                    "Art. 17",
                    f"Bet {bet.bet_id} ({bet.spot} {bet.amount}) of patron {bet.patron_id} was never settled; "
                    f"the rules give {due.result} with net {due.net:+d}.",
                    {"bet_id": bet.bet_id, "spot": str(bet.spot), "amount": bet.amount, "due_net": due.net, "stake": bet.amount},
                ),
                self._round_context(rnd, f":unsettled:{bet.bet_id}", bet_id=bet.bet_id, patron_id=bet.patron_id),
                time,
            )

    # ---- housekeeping -------------------------------------------------------------------------

    def _trim_rounds(self) -> None:
        """Forget old rounds that are checked and, if settlement runs, settled."""
        order = self.state.round_order
        while len(order) > RECENT_ROUNDS:
            oldest = self.state.rounds[order[0]]
            if (
                oldest.ended
                and oldest.checked
                and (oldest.round_settled or not self.state.settlement_seen or len(order) > 4 * RECENT_ROUNDS)
            ):
                del self.state.rounds[order.pop(0)]
            else:
                break


_HANDLERS: dict[type[m.Event], Callable[[TableWatch, Any], None]] = {
    m.ShoeStarted: TableWatch._shoe_started,
    m.CardRead: TableWatch._card_read,
    m.CutCardReached: TableWatch._cut_card,
    m.ShoeEnded: TableWatch._shoe_ended,
    m.RoundOpened: TableWatch._round_opened,
    m.BetPlaced: TableWatch._bet_placed,
    m.BetChanged: TableWatch._bet_changed,
    m.BetWithdrawn: TableWatch._bet_withdrawn,
    m.BetsClosed: TableWatch._bets_closed,
    m.CardsBurned: TableWatch._cards_burned,
    m.RoundCompleted: TableWatch._round_completed,
    m.RoundVoided: TableWatch._round_voided,
    m.BetSettled: TableWatch._settlement,
    m.RoundSettled: TableWatch._settlement,
}
