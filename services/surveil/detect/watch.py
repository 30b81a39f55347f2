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
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec

from ..core import procedure
from ..core import table as rules
from ..core.findings import AlertCode, Finding
from ..core.money import Settlement
from ..core.play import RoundResult
from ..core.profiles import HouseProfile, load_profile
from ..core.table import Bet, HandCard, Round, Shoe
from ..events import models
from . import patterns
from .alerts import Context

RECENT_ROUNDS = 12  # rounds kept after they are fully checked and settled
_NOTHING: tuple[list[Raised], list[Fact]] = ([], [])  # what most events yield; never mutated

SettlementEvent = models.BetSettled | models.RoundSettled


class RoundWatch(msgspec.Struct, gc=False):  # gc=False: as the round it holds (core/table.py)
    """A round, and how far the watch has judged it."""

    round: Round
    checked: bool = False  # its cards were checked against the shoe and the rules
    demo_bets_flagged: bool = False
    settled: bool = False  # its round.settled was checked (and its unsettled bets reported)
    waiting_settlements: tuple[SettlementEvent, ...] = ()  # until the table stream ends the round


class ShoeWatch(msgspec.Struct, gc=False):  # gc=False, tuples: a table's state (core/table.py)
    """A shoe as both streams tell of it (the table stream may mention it, in a burn or a round,
    before the shoe stream has started it), and the pattern detectors' view of it."""

    shoe: Shoe
    start_burn_checked: bool = False
    outcomes: tuple[int, ...] = (0, 0, 0)  # Banker, Player, Tie of its checked, non-demo rounds
    winnower: patterns.Winnower = msgspec.field(default_factory=patterns.Winnower)
    repeat_flagged: bool = False
    finalized: bool = False


class TableState(msgspec.Struct, gc=False):  # gc=False, tuples: a table's state (core/table.py)
    table_id: str
    shoes: dict[str, ShoeWatch] = {}
    shoe_order: tuple[str, ...] = ()  # in the order first heard of
    finished_shoes: tuple[str, ...] = ()  # recently finalized, so late events do not bring them back
    table_shoe: str | None = None  # the shoe of the latest round.opened
    rounds: dict[str, RoundWatch] = {}
    round_order: tuple[str, ...] = ()
    current_round: str | None = None
    unchecked: tuple[str, ...] = ()  # completed rounds waiting for the shoe stream, in order
    settlement_seen: bool = False
    orphan_settlements: tuple[SettlementEvent, ...] = ()  # for rounds the table stream has not opened (yet)
    earlier_fingerprints: tuple[tuple[int, ...], ...] = ()  # winnowed runs of earlier shoes, newest last
    shoe_outcome_history: tuple[tuple[int, ...], ...] = ()  # Banker/Player/Tie counts of earlier shoes
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
_WINDOW_BYTES = RECENT_IDS * DIGEST_SIZE


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
        self.unboxed_bets = 0  # bets placed whose event does not say their layout box
        # The rounds the last ``feed`` (or ``flush``) looked up, a superset of those it changed:
        # the detectors encode these again at their next commit, and leave the others as written.
        self.touched: set[str] = set()
        self._last_time: datetime | None = None
        # The window's digests as a set, for a watch fed one event after another from an empty
        # window (FloorWatch, offline replay): a set lookup instead of a scan of 8 KB. Good while this
        # watch alone changes the window: the FloorWatch's, one per table; the live service makes a
        # watch per event over a stored window, and scans it.
        self._digests: set[bytes] | None = None if state.recent_digests or state.recent_next else set()
        self._oldest_first: deque[bytes] = deque()  # the set's digests in the window's order, to evict by
        self._indexed = state.recent_digests

    # ---- entry points -------------------------------------------------------------------------

    def feed(self, event: models.Event) -> tuple[list[Raised], list[Fact]]:
        self.touched = set()
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
        if len(window) < _WINDOW_BYTES:
            window += digest
        else:  # the oldest digest makes way (none is there twice)
            at = state.recent_next * DIGEST_SIZE
            window[at : at + DIGEST_SIZE] = digest
            state.recent_next = (state.recent_next + 1) % RECENT_IDS
            if digests is not None:
                digests.discard(self._oldest_first.popleft())
        if digests is not None:
            digests.add(digest)
            self._oldest_first.append(digest)
        return False

    def flush(self) -> tuple[list[Raised], list[Fact]]:
        """The input ended: check what still waits for events that will not come."""
        self.touched = set()
        time = self._last_time
        if time is not None:
            for round_id in self.state.unchecked:
                self._check_round(self._kept_round(round_id), time)
            self.state.unchecked = ()
            for shoe_id in self.state.shoe_order:
                watched = self.state.shoes[shoe_id]
                if watched.shoe.ended:
                    self._finalize_shoe(watched, time)
            for event in self.state.orphan_settlements:
                orphan = event.data
                bet_id = orphan.bet_id if isinstance(orphan, models.BetSettledData) else None
                finding = rules.paid_unopened_round(orphan.round_id, bet_id, msgspec.to_builtins(orphan), getattr(orphan, "amount", 0))
                context = Context(self.state.table_id, f"round:{orphan.round_id}:unknown:{bet_id or ''}", round_id=orphan.round_id)
                self._raise(finding, context, time)
            self.state.orphan_settlements = ()
        return self._take()

    def _take(self) -> tuple[list[Raised], list[Fact]]:
        raised, facts = self.raised, self.facts
        self.raised, self.facts = [], []
        return raised, facts

    def _raise(self, finding: Finding, context: Context, time: datetime) -> None:
        self.raised.append(Raised(finding, context, time))

    def _round(self, round_id: str) -> RoundWatch | None:
        """The round, if the table keeps it. Every round the watch reads or changes comes through
        here (or is made in ``_round_opened``), and is noted in ``touched``."""
        self.touched.add(round_id)
        return self.state.rounds.get(round_id)

    def _kept_round(self, round_id: str) -> RoundWatch:
        """The round the table keeps (the caller knows it does), noted in ``touched``."""
        self.touched.add(round_id)
        return self.state.rounds[round_id]

    def _profile(self, rnd: Round) -> HouseProfile:
        return load_profile(self.profile_override or rnd.profile)

    def _round_context(self, rnd: Round, scope: str = "", **extra: str | None) -> Context:
        return Context(
            table_id=self.state.table_id,
            scope=f"round:{rnd.round_id}{scope}",
            shoe_id=rnd.shoe_id,
            round_id=rnd.round_id,
            dealer_id=rnd.dealer_id,
            **extra,  # type: ignore[arg-type]
        )

    def _bet_context(self, rnd: Round, bet: Bet, scope: str) -> Context:
        return self._round_context(rnd, scope, bet_id=bet.bet_id, patron_id=bet.patron_id)

    # ---- the shoe stream ----------------------------------------------------------------------

    def _shoe(self, shoe_id: str) -> ShoeWatch | None:
        """The shoe, heard of first from either stream; None once it is finalized."""
        watched = self.state.shoes.get(shoe_id)
        if watched is None and shoe_id not in self.state.finished_shoes:
            watched = self.state.shoes[shoe_id] = ShoeWatch(Shoe(shoe_id))
            self.state.shoe_order += (shoe_id,)
        return watched

    def _table_stream_left(self, shoe_id: str) -> bool:
        """Whether the table stream is on a later shoe (in the order the shoes were first heard
        of): no round of this one is to come. Not merely another shoe: the table stream may be a
        shoe or more behind the shoe stream (as a worker restarted after a broker restart reads them)."""
        order = self.state.shoe_order
        return self.state.table_shoe in order and order.index(self.state.table_shoe) > order.index(shoe_id)

    def _started_shoe(self, shoe_id: str) -> ShoeWatch | None:
        watched = self.state.shoes.get(shoe_id)
        return watched if watched is not None and watched.shoe.started else None

    def _shoe_started(self, event: models.ShoeStarted) -> None:
        d = event.data
        watched = self._shoe(d.shoe_id)
        if watched is not None:
            watched.shoe.start(d.decks, d.automatic)  # False when redelivered

    def _card_read(self, event: models.CardRead) -> None:
        d = event.data
        watched = self._started_shoe(d.shoe_id)
        if watched is None or d.index in watched.shoe.reads:
            return  # no shoe.started seen, or a redelivered read
        for finding in watched.shoe.read(d.index, d.card, d.face_up):
            self._raise(finding, self._card_context(watched.shoe, d.index), event.time)
        self._fingerprint(watched, d.card, d.index, event.time)
        self._check_ready_rounds(event.time)

    def _card_context(self, shoe: Shoe, index: int) -> Context:
        return Context(self.state.table_id, f"shoe:{shoe.shoe_id}:{index}", shoe_id=shoe.shoe_id)

    def _cut_card(self, event: models.CutCardReached) -> None:
        d = event.data
        watched = self._started_shoe(d.shoe_id)
        if watched is None:
            return
        finding = watched.shoe.cut_card(d.index)
        if finding:
            shoe_id = watched.shoe.shoe_id
            self._raise(finding, Context(self.state.table_id, f"shoe:{shoe_id}:cut", shoe_id=shoe_id), event.time)

    def _shoe_ended(self, event: models.ShoeEnded) -> None:
        watched = self._started_shoe(event.data.shoe_id)
        if watched is None:
            return
        finding = watched.shoe.end()
        if finding:
            shoe_id = watched.shoe.shoe_id
            self._raise(finding, Context(self.state.table_id, f"shoe:{shoe_id}:cut", shoe_id=shoe_id), event.time)
        self._check_ready_rounds(event.time)
        if self._table_stream_left(watched.shoe.shoe_id):
            self._finalize_shoe(watched, event.time)

    # ---- the table stream ---------------------------------------------------------------------

    def _round_opened(self, event: models.RoundOpened) -> None:
        d = event.data
        if d.round_id in self.state.rounds:
            return
        previous = self._round(self.state.current_round or "")
        rnd = Round(
            table_id=d.table_id,
            round_id=d.round_id,
            shoe_id=d.shoe_id,
            round_no=d.round_no,
            dealer_id=d.dealer_id,
            profile=d.profile,
            demo=d.demo,
            min_bet=d.min_bet,
            max_bet=d.max_bet,
            currency=d.currency,
            seats=d.seats,
        )
        dropped = rnd.carry_over(previous.round, d.carried_bet_ids) if previous is not None else []
        watched = self.state.rounds[d.round_id] = RoundWatch(rnd)
        self.touched.add(d.round_id)
        for bet in dropped:  # withdrawn before the round opened
            self._check_tie_change(rnd, bet, None, event.time)
        self.state.round_order += (d.round_id,)
        if self.state.orphan_settlements:
            watched.waiting_settlements = tuple(o for o in self.state.orphan_settlements if o.data.round_id == d.round_id)
            self.state.orphan_settlements = tuple(o for o in self.state.orphan_settlements if o.data.round_id != d.round_id)
        self.state.current_round = d.round_id
        shoe = self._shoe(d.shoe_id)
        if self.state.table_shoe != d.shoe_id:
            self.state.table_shoe = d.shoe_id
            for shoe_id in self.state.shoe_order:
                earlier = self.state.shoes[shoe_id]
                if earlier.shoe.ended and self._table_stream_left(shoe_id):
                    self._finalize_shoe(earlier, event.time)
        if shoe is None:
            return
        for finding in shoe.shoe.open_round(d.demo):
            after_play = "real_rounds_before" in finding.evidence
            self._raise(finding, self._round_context(rnd, ":after-play" if after_play else ""), event.time)
        self._trim_rounds()

    def _bet_placed(self, event: models.BetPlaced) -> None:
        d = event.data
        watched = self._round(d.round_id)
        if watched is None or d.bet_id in watched.round.bets:
            return
        bet = watched.round.bets[d.bet_id] = Bet(d.bet_id, d.patron_id, d.seat, d.spot, d.amount, box=d.box)
        if d.box is None:
            self.unboxed_bets += 1  # Art. 15 cannot be judged: an event recorded before v1.2
        standing = rules.check_standing_box(bet)
        if standing is not None:
            self._raise(standing, self._bet_context(watched.round, bet, f":box:{bet.bet_id}"), event.time)
        self._after_bet_move(watched, bet, event.time, "placed", None)

    def _bet_changed(self, event: models.BetChanged) -> None:
        d = event.data
        watched = self._round(d.round_id)
        bet = watched.round.bets.get(d.bet_id) if watched else None
        if watched is None or bet is None:
            return
        if bet.carried is not None:
            self._check_tie_change(watched.round, bet, (d.spot, d.amount), event.time)
        before = (bet.spot, bet.amount)
        bet.spot, bet.amount = d.spot, d.amount
        self._after_bet_move(watched, bet, event.time, "changed", before)

    def _bet_withdrawn(self, event: models.BetWithdrawn) -> None:
        d = event.data
        watched = self._round(d.round_id)
        bet = watched.round.bets.get(d.bet_id) if watched else None
        if watched is None or bet is None or bet.withdrawn:
            return
        if bet.carried is not None:
            self._check_tie_change(watched.round, bet, None, event.time)
        bet.withdrawn = True
        self._after_bet_move(watched, bet, event.time, "withdrawn", (bet.spot, bet.amount))

    def _after_bet_move(self, watched: RoundWatch, bet: Bet, time: datetime, verb: str, before: tuple[Any, int] | None) -> None:
        rnd = watched.round
        if rnd.demo and not watched.demo_bets_flagged:
            watched.demo_bets_flagged = True
            for finding in procedure.check_demo_round(0, 1):
                self._raise(finding, self._round_context(rnd, ":bets"), time)
        late = rules.check_late_bet(rnd, bet, verb)
        if late is not None:
            self._raise(late, self._bet_context(rnd, bet, f":bet:{bet.bet_id}:{verb}"), time)
            if rnd.closed and verb != "withdrawn":
                self._check_amount(rnd, bet, time)
            if rnd.closed:
                for ordinal, finding in enumerate(rules.check_late_limit(rnd, bet, before)):
                    self._raise(finding, self._bet_context(rnd, bet, f":bet:{bet.bet_id}:{verb}:limit:{ordinal}"), time)

    def _check_tie_change(self, rnd: Round, bet: Bet, after: tuple[Any, int] | None, time: datetime) -> None:
        profile = self._profile(rnd)
        for finding in rules.check_tie_change(bet, after, profile.after_tie, profile.name):
            self._raise(finding, self._bet_context(rnd, bet, f":tie:{bet.bet_id}"), time)

    def _check_amount(self, rnd: Round, bet: Bet, time: datetime) -> None:
        for finding in rules.check_bet_amount(rnd, bet):
            self._raise(finding, self._bet_context(rnd, bet, f":bet:{bet.bet_id}"), time)

    def _bets_closed(self, event: models.BetsClosed) -> None:
        watched = self._round(event.data.round_id)
        if watched is None or watched.round.closed:
            return
        rnd = watched.round
        rnd.closed = True
        for bet in rnd.active_bets():
            self._check_amount(rnd, bet, event.time)
        for ordinal, finding in enumerate(rules.check_table_limit(rnd)):
            self._raise(finding, self._round_context(rnd, f":limit:{ordinal}"), event.time)

    def _cards_burned(self, event: models.CardsBurned) -> None:
        d = event.data
        watched = self._shoe(d.shoe_id)
        if watched is not None:
            watched.shoe.burn(d.indices, d.round_id)

    def _round_completed(self, event: models.RoundCompleted) -> None:
        d = event.data
        watched = self._round(d.round_id)
        if watched is None or watched.round.ended:
            return
        rnd = watched.round
        rnd.complete(
            [HandCard(c.index, c.card) for c in d.player],
            [HandCard(c.index, c.card) for c in d.banker],
            RoundResult(d.player_total, d.banker_total, d.outcome, d.player_pair, d.banker_pair),
            d.squeezed_by,
        )
        self.state.unchecked += (rnd.round_id,)
        shoe = self._shoe(rnd.shoe_id)
        for placed in shoe.shoe.place(rnd) if shoe is not None else ():  # the table stream's own account of the cards
            placed.evidence["stake"] = rnd.staked()
            scope = f":reused:{placed.evidence['index']}:{placed.evidence['hand']}" if placed.code == AlertCode.CARD_REUSED else ":burn"
            self._raise(placed, self._round_context(rnd, scope), event.time)
        profile = self._profile(rnd)
        finding = rules.check_squeeze(rnd, profile.squeeze_allowed, profile.squeeze_holder)
        if finding:
            self._raise(finding, self._round_context(rnd, patron_id=rnd.squeezed_by), event.time)
        for bet, won in rules.decided_bets(rnd):
            self.facts.append(PatronBet(bet.patron_id, self.state.table_id, rnd.round_id, bet.bet_id, won, bet.amount, event.time))
        self._check_ready_rounds(event.time)
        self._settle_waiting(watched, event.time)

    def _round_voided(self, event: models.RoundVoided) -> None:
        d = event.data
        watched = self._round(d.round_id)
        if watched is None or watched.round.ended:
            return
        watched.round.void(
            d.reason,
            None if d.player is None else [HandCard(c.index, c.card) for c in d.player],
            None if d.banker is None else [HandCard(c.index, c.card) for c in d.banker],
        )
        self.state.unchecked += (d.round_id,)  # judged once the shoe stream has its cards
        self._check_ready_rounds(event.time)
        self._settle_waiting(watched, event.time)

    # ---- round checks (need both streams) -----------------------------------------------------

    def _check_ready_rounds(self, time: datetime) -> None:
        """Check, in order, the completed rounds whose cards the shoe stream has all read."""
        while self.state.unchecked:
            watched = self._kept_round(self.state.unchecked[0])
            shoe = self.state.shoes.get(watched.round.shoe_id)
            if shoe is not None and not shoe.shoe.has_cards_of(watched.round):
                return
            self.state.unchecked = self.state.unchecked[1:]
            self._check_round(watched, time)

    def _check_round(self, watched: RoundWatch, time: datetime) -> None:
        rnd = watched.round
        declared = rnd.declared
        watched.checked = True
        if declared is None:  # voided (Art. 10)
            shoe_watch = self._started_shoe(rnd.shoe_id)
            self._raise(rules.check_void(rnd, shoe_watch.shoe if shoe_watch else None), self._round_context(rnd), time)
            return
        self.rounds_checked += 1
        shoe = self._started_shoe(rnd.shoe_id)
        if shoe is not None and not shoe.start_burn_checked:
            shoe.start_burn_checked = True
            self._check_start_burn(shoe, rnd, time)
        found = rules.check_completed_round(rnd, shoe.shoe if shoe else None, self._profile(rnd).last_round)
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
                won = patterns.OUTCOME_INDEX[declared.outcome]
                shoe.outcomes = tuple(count + (kind == won) for kind, count in enumerate(shoe.outcomes))

    def _check_start_burn(self, watched: ShoeWatch, rnd: Round, time: datetime) -> None:
        finding = watched.shoe.check_start_burn(self._profile(rnd).burn)
        if finding:
            shoe_id = watched.shoe.shoe_id
            context = Context(self.state.table_id, f"shoe:{shoe_id}:burn", shoe_id=shoe_id, dealer_id=rnd.dealer_id)
            self._raise(finding, context, time)

    def _finalize_shoe(self, watched: ShoeWatch, time: datetime) -> None:
        if watched.finalized:
            return
        watched.finalized = True
        shoe = watched.shoe
        of_shoe = [r for r in self.state.unchecked if self.state.rounds[r].round.shoe_id == shoe.shoe_id]
        self.state.unchecked = tuple(r for r in self.state.unchecked if r not in of_shoe)
        for round_id in of_shoe:
            self._check_round(self._kept_round(round_id), time)
        for finding in shoe.unaccounted(up_to=shoe.last_index):
            context = Context(self.state.table_id, f"shoe:{shoe.shoe_id}:{finding.evidence['index']}", shoe_id=shoe.shoe_id)
            self._raise(finding, context, time)
        self._drift(watched, time)
        self.state.earlier_fingerprints = (*self.state.earlier_fingerprints, watched.winnower.selected)[-patterns.REPEAT_SHOES_KEPT :]
        del self.state.shoes[shoe.shoe_id]
        self.state.shoe_order = tuple(s for s in self.state.shoe_order if s != shoe.shoe_id)
        self.state.finished_shoes = (*self.state.finished_shoes[-7:], shoe.shoe_id)

    # ---- patterns at the table ----------------------------------------------------------------

    def _fingerprint(self, watched: ShoeWatch, card: str, index: int, time: datetime) -> None:
        selected = watched.winnower.add(card)
        if selected is None or watched.repeat_flagged:
            return
        shoe_id = watched.shoe.shoe_id
        for age, earlier in enumerate(reversed(self.state.earlier_fingerprints), start=1):
            if selected in earlier:
                watched.repeat_flagged = True
                self._raise(
                    Finding(
                        AlertCode.SHOE_REPEAT,
                        "Art. 2.1",
                        f"Cards up to card {index} of this shoe repeat a run of {patterns.REPEAT_K}+ cards from the "
                        f"shoe {age} before at this table: a false shuffle or a pre-arranged slug.",
                        {"index": index, "run": list(watched.winnower.recent_cards), "shoes_back": age},
                    ),
                    Context(self.state.table_id, f"shoe:{shoe_id}:repeat", shoe_id=shoe_id),
                    time,
                )
                return

    def _drift(self, watched: ShoeWatch, time: datetime) -> None:
        self.state.shoe_outcome_history = history = (*self.state.shoe_outcome_history, watched.outcomes)[-patterns.DRIFT_TABLE_SHOES :]
        window = tuple(sum(counts[i] for counts in history) for i in range(3))
        shoe_id = watched.shoe.shoe_id
        tests = [(f"shoe:{shoe_id}", watched.outcomes)]
        if len(history) > 1:  # with one shoe the window is that shoe
            tests.append((f"table-window:{shoe_id}", window))
        for scope, observed in tests:
            n = sum(observed)
            if n < patterns.DRIFT_MIN_ROUNDS:
                continue
            self.state.drift_tests += 1
            statistic = patterns.chi_square(observed, watched.shoe.decks)
            if statistic < patterns.DRIFT_THRESHOLD:
                continue
            expected = [round(n * p, 1) for p in patterns.outcome_probabilities(watched.shoe.decks)]
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
                Context(self.state.table_id, scope, shoe_id=shoe_id),
                time,
            )

    # ---- the settlement stream ----------------------------------------------------------------

    def _settlement(self, event: models.BetSettled | models.RoundSettled) -> None:
        self.state.settlement_seen = True
        watched = self._round(event.data.round_id)
        if watched is None:
            self.state.orphan_settlements += (event,)
            return
        watched.waiting_settlements = (*watched.waiting_settlements, event)
        self._settle_waiting(watched, event.time)

    def _settle_waiting(self, watched: RoundWatch, time: datetime) -> None:
        if not watched.round.ended:
            return
        waiting, watched.waiting_settlements = watched.waiting_settlements, ()
        for event in waiting:
            if isinstance(event, models.BetSettled):
                self._check_bet_settled(watched.round, event, time)
            else:
                self._check_round_settled(watched, event.data, time)

    def _check_bet_settled(self, rnd: Round, event: models.BetSettled, time: datetime) -> None:
        d = event.data
        if rnd.paid.get(d.bet_id) == event.id:
            return  # the same event delivered again
        paid = Settlement(d.result, d.net, d.commission)
        first = rnd.record_payment(d.bet_id, event.id, d.amount, paid)
        if first is not None:
            again = self._round_context(rnd, f":settle:{d.bet_id}:{event.id}", bet_id=d.bet_id, patron_id=d.patron_id)
            self._raise(rules.paid_twice(d.bet_id, d.patron_id, first, event.id, d.net, d.amount), again, time)
            return
        bet = rnd.bets.get(d.bet_id)
        wrong: Finding | None
        if bet is None or bet.withdrawn:
            wrong = rules.paid_unknown_bet(rnd, d.bet_id, d.net, d.amount)
        else:
            profile = self._profile(rnd)
            wrong = rules.check_payment(rnd, bet, paid, d.spot, d.amount, profile.commission, profile.commission_rounding)
        if wrong:
            self._raise(wrong, self._round_context(rnd, f":settle:{d.bet_id}", bet_id=d.bet_id, patron_id=d.patron_id), time)

    def _check_round_settled(self, watched: RoundWatch, d: models.RoundSettledData, time: datetime) -> None:
        if watched.settled:
            return
        watched.settled = True
        for earlier in self.state.round_order:
            other = self._kept_round(earlier)
            if other is watched:
                break
            if other.round.ended and not other.settled and other.round.completed:
                self._unsettled(other.round, time)
                other.settled = True
        rnd = watched.round
        self._unsettled(rnd, time)
        finding = rules.check_round_totals(rnd, (d.staked, d.paid_out, d.commission, d.house_net))
        if finding:
            self._raise(finding, self._round_context(rnd, ":totals"), time)

    def _unsettled(self, rnd: Round, time: datetime) -> None:
        profile = self._profile(rnd)
        for bet, finding in rules.unpaid_bets(rnd, profile.commission, profile.commission_rounding):
            self._raise(finding, self._bet_context(rnd, bet, f":unsettled:{bet.bet_id}"), time)

    # ---- housekeeping -------------------------------------------------------------------------

    def _trim_rounds(self) -> None:
        """Forget old rounds that are checked and, if settlement runs, settled."""
        order = self.state.round_order
        while len(order) > RECENT_ROUNDS:
            oldest = self.state.rounds[order[0]]
            if (
                oldest.round.ended
                and oldest.checked
                and (oldest.settled or not self.state.settlement_seen or len(order) > 4 * RECENT_ROUNDS)
            ):
                del self.state.rounds[order[0]]
                order = order[1:]
            else:
                break
        self.state.round_order = order


_HANDLERS: dict[type[models.Event], Callable[[TableWatch, Any], None]] = {
    models.ShoeStarted: TableWatch._shoe_started,
    models.CardRead: TableWatch._card_read,
    models.CutCardReached: TableWatch._cut_card,
    models.ShoeEnded: TableWatch._shoe_ended,
    models.RoundOpened: TableWatch._round_opened,
    models.BetPlaced: TableWatch._bet_placed,
    models.BetChanged: TableWatch._bet_changed,
    models.BetWithdrawn: TableWatch._bet_withdrawn,
    models.BetsClosed: TableWatch._bets_closed,
    models.CardsBurned: TableWatch._cards_burned,
    models.RoundCompleted: TableWatch._round_completed,
    models.RoundVoided: TableWatch._round_voided,
    models.BetSettled: TableWatch._settlement,
    models.RoundSettled: TableWatch._settlement,
}
