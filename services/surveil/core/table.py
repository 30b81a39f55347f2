"""A baccarat table as the rules see it: the shoe in play, what left it and where each card went
(Art. 1-4, 7-8), and each round: its bets and their changes (Art. 12-16), the cards dealt to each
hand (Art. 7, 9), the result the table declared (Art. 5, 11-13) and what each bet was paid
(Art. 17-18).

One model for everyone who keeps a round or a shoe: the table-controller builds it from the
dealer's console, the bet sensors and the shoe's reads; settlement and the detectors from the
table events; the incident report from a recorded log; the simulator as it plays. The checks are
pure functions of the round and the shoe that return findings, each naming its alert code and
article; what a caller does with a finding (an alert, a rejection, nothing) is the caller's.

Shoe and round are plain ``msgspec`` structs of strings and numbers, so a service can store them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from types import MappingProxyType
from typing import Any

import msgspec

from . import money, procedure
from .cards import CARDS
from .findings import AlertCode, Finding, Severity
from .money import VOID, BetResult, Commission, Rounding, Settlement, Spot, SqueezeHolder, TieMove
from .play import DealtCard, Outcome, RoundResult, check_partial_deal, check_play
from .profiles import Burn, LastRound
from .shoe import CARDS_PER_DECK, ShoeComposition

STANDING = "standing"  # a bet's seat, or its box: a standing bettor, or the standing bettors' area
_NONE: Mapping[int, int] = MappingProxyType({})


# What a table keeps of each round and of its shoe (Bet, HandCard, Round, Shoe here, RoundResult in
# play.py, ShoeComposition in shoe.py, the watch's state in detect/watch.py) is out of the cyclic
# garbage collector's reach (gc=False): none of it refers back to what holds it, so it is never
# part of a cycle, and the detectors keep thousands of tables' state, which every full collection
# walked while the worker's loop waited (docs/performance.md, "The detectors' worker"). Never give
# these types a field that can lead back to a holder (Any, a callable, a parent): a cycle through
# them would never be freed. Their sequences are tuples for the same reason: a tuple of objects
# the collector cannot track (these types, ints, strings) is untracked by the first collection
# that sees it, a list never is.
class Bet(msgspec.Struct, omit_defaults=True, gc=False):
    """A bet as the table recorded it. ``carried`` is its spot and amount as the last tie left it
    (Art. 12), for a bet carried over into this round."""

    bet_id: str
    patron_id: str
    seat: str  # who placed it: a seat number ("1", "2", ...), or "standing"
    spot: Spot
    amount: int
    withdrawn: bool = False
    carried: tuple[Spot, int] | None = None
    box: str | None = None  # where its chips lie: a seat's box (its number), or "standing"; None: not said


class HandCard(msgspec.Struct, frozen=True, gc=False):
    """A card in a hand: its 1-based shoe index and its code; ``card`` is None while only the
    shoe's read of that index can tell (a hand box that does not recognise cards)."""

    index: int
    card: str | None


class Round(msgspec.Struct, omit_defaults=True, gc=False):
    """One round of a table: opened with the house's terms, bets placed and changed, bets closed,
    the hands dealt and the result declared, or the round voided (Art. 10); then each bet paid."""

    table_id: str
    round_id: str
    shoe_id: str
    round_no: int = 0  # 1-based within the shoe, demonstration rounds included
    dealer_id: str = ""
    profile: str = ""  # the house profile in force (core.profiles)
    demo: bool = False  # a demonstration round (Art. 2.2)
    min_bet: int = 0
    max_bet: int = 0  # the table limit (Art. 14)
    currency: str = ""
    bets: dict[str, Bet] = {}
    seats: int | None = None  # the table's seats (Art. 1: seven or more); None: not said
    closed: bool = False  # bets closed
    player: tuple[HandCard, ...] = ()  # in the order dealt
    banker: tuple[HandCard, ...] = ()
    declared: RoundResult | None = None  # the result the table announced: the round is complete
    squeezed_by: str | None = None  # the patron who held the cards (Art. 16)
    voided: bool = False  # Art. 10
    void_reason: str = ""
    hands_unreported: bool = False  # voided, by an event that does not say which cards were dealt
    paid: dict[str, str] = {}  # bet id -> id of the settlement that paid it
    paid_totals: tuple[int, int, int, int] = (0, 0, 0, 0)  # staked, paid_out, commission, house_net

    # ---- what the round is ------------------------------------------------------------------

    @property
    def completed(self) -> bool:
        return self.declared is not None

    @property
    def ended(self) -> bool:
        return self.declared is not None or self.voided

    def active_bets(self) -> list[Bet]:
        return [bet for bet in self.bets.values() if not bet.withdrawn]

    def staked(self) -> int:
        return sum(bet.amount for bet in self.active_bets())

    def hands(self, stand_ins: Mapping[int, int] = _NONE) -> tuple[list[DealtCard], list[DealtCard]]:
        """The hands with every card known, as the play checks take them; a card at an index the
        shoe never read is put at the index it stands for (``Shoe.stand_ins``), if any."""
        return [DealtCard(stand_ins.get(c.index, c.index), CARDS[c.card]) for c in self.player if c.card], [
            DealtCard(stand_ins.get(c.index, c.index), CARDS[c.card]) for c in self.banker if c.card
        ]

    def indices(self) -> list[int]:
        """The shoe indices of the cards in the hands, Player's first."""
        return [c.index for c in (*self.player, *self.banker)]

    def holds_index(self, index: int) -> bool:
        return any(c.index == index for c in (*self.player, *self.banker))

    # ---- what happens to it -----------------------------------------------------------------

    def carry_over(self, previous: Round, bet_ids: Iterable[str]) -> list[Bet]:
        """Art. 12: the Player and Banker bets ``previous`` left on its tie join this round (those
        of ``bet_ids`` that ``previous`` holds and that were not withdrawn). Returns the bets the
        tie carried that ``bet_ids`` leave out: they were withdrawn before this round (Art. 12(1)),
        as the house may forbid (``check_tie_change``)."""
        if previous.declared is None:
            return []
        named = list(bet_ids)
        for bet_id in named:
            bet = previous.bets.get(bet_id)
            if bet is not None and not bet.withdrawn:
                self.bets[bet_id] = _carried(bet)
        if previous.declared.outcome != _TIE:
            return []
        return [_carried(bet) for bet in previous.active_bets() if bet.spot in _DECIDED_SPOTS and bet.bet_id not in named]

    def complete(self, player: Iterable[HandCard], banker: Iterable[HandCard], declared: RoundResult, squeezed_by: str | None) -> None:
        self.player, self.banker, self.declared, self.squeezed_by = tuple(player), tuple(banker), declared, squeezed_by

    def void(self, reason: str, player: Iterable[HandCard] | None, banker: Iterable[HandCard] | None) -> None:
        """Art. 10: the round is void, for ``reason``, with the cards dealt until then (None when
        the event does not say)."""
        self.voided, self.void_reason = True, reason
        self.hands_unreported = player is None and banker is None
        self.player, self.banker = tuple(player or ()), tuple(banker or ())

    def expected_settlement(self, bet: Bet, commission: Commission, rounding: Rounding = Rounding.DOWN) -> Settlement:
        """What the rules pay ``bet`` (Art. 10, 12, 17, 18): every stake back on a void."""
        if self.voided or self.declared is None:
            return VOID
        return money.settle(bet.spot, bet.amount, self.declared, commission, rounding)

    def settlements(self, commission: Commission, rounding: Rounding = Rounding.DOWN) -> list[tuple[Bet, Settlement]]:
        """Each bet still in play and what the rules pay it."""
        return [(bet, self.expected_settlement(bet, commission, rounding)) for bet in self.active_bets()]

    def record_payment(self, bet_id: str, settlement_id: str, amount: int, paid: Settlement) -> str | None:
        """Count a settlement of ``bet_id`` into the round's totals; the id of an earlier settlement
        of the same bet, if there was one (the first is the one kept)."""
        added = money.totals_of(amount, paid)
        staked, paid_out, commission, house_net = (total + more for total, more in zip(self.paid_totals, added))
        self.paid_totals = (staked, paid_out, commission, house_net)
        first = self.paid.get(bet_id)
        if first is None:
            self.paid[bet_id] = settlement_id
        return first


def _reused(rnd: Round, hand: str, dealt: HandCard, before: dict[str, str | None]) -> Finding:
    where = {"burned": "was burned before", "an earlier round": f"was dealt in round {before['round_id']}"}.get(
        str(before["where"]), f"is also in the {before['where']}"
    )
    return Finding(
        AlertCode.CARD_REUSED,
        "Art. 2, 8",
        f"Card {dealt.index} of the shoe{f' (the {dealt.card})' if dealt.card else ''} is in the {hand.capitalize()} hand "
        f"of round {rnd.round_id}, but it {where}: a card brought back into play.",
        {"index": dealt.index, "card": dealt.card, "hand": hand, "first": before},
    )


def _carried(bet: Bet) -> Bet:
    return Bet(bet.bet_id, bet.patron_id, bet.seat, bet.spot, bet.amount, carried=(bet.spot, bet.amount))


# A shoe stored before ``placed_rounds`` named each card's round in ``placed``: that field is now
# ``legacy_placed``, folded into the two when such a shoe is decoded.
_SHOE_FIELD_NAMES = {"placed": "placed_at", "legacy_placed": "placed"}


class Shoe(msgspec.Struct, omit_defaults=True, gc=False, rename=_SHOE_FIELD_NAMES):
    """A shoe as the table's devices tell of it: what it holds (Art. 1), each card read as it left
    (by its 1-based index, burns included), the cut card, and where each card went: burned or
    placed in a hand, and in which round. ``accounted_upto``: every card up to that index has been
    judged (burned, dealt, or reported as neither); a round's check judges every card up to its
    last, so which cards were dealt need not be kept.

    A card placed names its round by the round's place in ``placed_rounds``: a round's id once,
    not once a card, as the detectors write a table's shoe at every commit."""

    shoe_id: str
    started: bool = False
    decks: int = 0
    automatic: bool = False  # dealt by a shuffling-dealing machine (Art. 2.3)
    composition: ShoeComposition | None = None
    reads: dict[int, str] = {}  # index -> card
    last_index: int = 0
    ended: bool = False
    cut_index: int | None = None  # cards out before the cut card
    burned: dict[int, str] = {}  # index -> round id ("" at the shoe's start)
    placed: dict[int, int] = {}  # index -> its round's place in placed_rounds, as the table stream completes the rounds
    placed_rounds: tuple[str, ...] = ()  # the ids of the rounds whose cards were placed, in that order
    accounted_upto: int = 0
    round_spans: tuple[tuple[int, int], ...] = ()  # the first and last hand index of each round judged
    exposed: tuple[int, ...] = ()  # indices of the cards that came out face up (Art. 4)
    demo_rounds: int = 0
    real_rounds: int = 0  # rounds opened that were not demonstrations
    legacy_placed: dict[int, str] = {}  # index -> round id, as a shoe was stored before placed_rounds

    def __post_init__(self) -> None:
        for index, round_id in self.legacy_placed.items():  # in the order the cards were placed
            if round_id not in self.placed_rounds[-1:]:
                self.placed_rounds += (round_id,)
            self.placed[index] = len(self.placed_rounds) - 1
        self.legacy_placed = {}
        if self.placed and not 0 <= min(self.placed.values()) <= max(self.placed.values()) < len(self.placed_rounds):
            raise ValueError("a card placed in a round the shoe does not name")

    def start(self, decks: int, automatic: bool) -> bool:
        """The shoe's start (Art. 1-2); False when it had started already."""
        if self.started:
            return False
        self.started, self.decks, self.automatic = True, decks, automatic
        self.composition = ShoeComposition(decks)
        return True

    def read(self, index: int, card: str, face_up: bool) -> list[Finding]:
        """The card at ``index`` left the shoe: a copy the shoe never held (Art. 1) or a card that
        came out face up (Art. 4) is a finding. The shoe must have started, and not read ``index``."""
        assert self.composition is not None
        self.reads[index] = card
        self.last_index = max(self.last_index, index)
        found = []
        if not self.composition.take(card):
            count = self.composition.copies_seen(card)
            found.append(
                Finding(
                    AlertCode.CARD_OVERCOUNT,
                    "Art. 1",
                    f"Copy {count} of the {card} came out of a {self.decks}-deck shoe: a foreign card is in play.",
                    {"card": card, "index": index, "copies_seen": count, "decks": self.decks},
                )
            )
        if face_up:
            self.exposed += (index,)
            found.append(
                Finding(
                    AlertCode.CARD_EXPOSED,
                    "Art. 4",
                    f"The {card} (card {index}) came out of the shoe face up; the round and its bets stay valid.",
                    {"card": card, "index": index},
                )
            )
        return found

    def cut_card(self, index: int) -> Finding | None:
        """The cut card came out after ``index`` cards; it must have had about 12 behind it
        (Art. 2.1; no cut card with a machine, Art. 2.3). Only the first report counts."""
        if self.cut_index is not None:
            return None
        self.cut_index = index
        return None if self.automatic else procedure.check_cut_card(self.decks, index)

    def end(self) -> Finding | None:
        """The shoe ended: a manual one dealt past the cut card's last place must have shown it
        (Art. 2.1, 3; no cut card with a machine, Art. 2.3). Only the first report counts."""
        if self.ended:
            return None
        self.ended = True
        return (
            None
            if self.automatic or not self.started
            else procedure.check_cut_card_seen(self.decks, self.last_index, self.cut_index is not None)
        )

    def burn(self, indices: Iterable[int], round_id: str | None) -> None:
        """Art. 2.1, 8, 10: cards discarded at the shoe's start (``round_id`` None), at a round's
        start, or those of a voided round."""
        for index in indices:
            self.burned.setdefault(index, round_id or "")

    def cards_of(self, rnd: Round) -> list[int]:
        """The shoe indices of ``rnd``'s cards: its hands', or for a round voided by an event that
        does not name them, the cards burned for it."""
        if rnd.hands_unreported:
            return sorted(index for index, round_id in self.burned.items() if round_id == rnd.round_id)
        return rnd.indices()

    def place(self, rnd: Round) -> list[Finding]:
        """Art. 2, 8: the cards of ``rnd``, just completed, against what the table said before
        (burns and earlier rounds, in the table stream's order): a shoe index in two hands, in
        an earlier round, or burned before (``CARD_REUSED``: a card back in play is how a known
        card is brought to a hand); a burn between the round's first and last card
        (``BURN_MID_ROUND``: Art. 8 burns only at a round's start, before its first card)."""
        found = []
        held: dict[int, str] = {}
        for hand, cards in (("player", rnd.player), ("banker", rnd.banker)):
            for dealt in cards:
                index = dealt.index
                before: dict[str, str | None]
                if index in held:
                    before = {"where": f"{held[index]} hand", "round_id": rnd.round_id}
                elif index in self.placed:
                    before = {"where": "an earlier round", "round_id": self.placed_rounds[self.placed[index]]}
                elif index in self.burned:
                    before = {"where": "burned", "round_id": self.burned[index] or None}
                else:
                    held[index] = hand
                    continue
                found.append(_reused(rnd, hand, dealt, before))
        if held:  # none of them placed before
            self.placed.update(dict.fromkeys(held, len(self.placed_rounds)))
            self.placed_rounds += (rnd.round_id,)
            first, last = min(held), max(held)
            inside = sorted(i for i in self.burned if first < i < last and i not in held)
            if inside:
                found.append(
                    Finding(
                        AlertCode.BURN_MID_ROUND,
                        "Art. 8",
                        f"Card(s) {', '.join(map(str, inside))} were burned after the round's first card (card {first}) "
                        f"and before its last (card {last}): a burn in the middle of a round changes which card each hand "
                        "receives; Art. 8 burns only at the start of a round.",
                        {"burned": inside, "first_card": first, "last_card": last},
                    )
                )
        return found

    def has_cards_of(self, rnd: Round) -> bool:
        """Whether the shoe has read every card of ``rnd``, or ended. An index past the shoe's
        last card can never be read: it is not waited for."""
        size = self.decks * CARDS_PER_DECK
        needed = max((i for i in self.cards_of(rnd) if i <= size), default=0)
        return self.started and (self.ended or self.last_index >= needed)

    def stand_ins(self, rnd: Round) -> dict[int, int]:
        """Art. 7: each hand card of ``rnd`` at an index the shoe never read, and the card it
        stands for: the first cards out of the shoe after those already judged that are neither
        burned nor in a hand, one for each such hand card in the order dealt. A wrong index is
        then one finding (``CARD_MISMATCH``), not also a card unaccounted for, an order broken or
        a later round's cards reported loose. Pure: the same answer until ``check_round``."""
        unread = [index for index in rnd.indices() if index not in self.reads]
        if not unread:
            return {}
        own = set(rnd.indices())
        free = (
            index
            for index in range(self.accounted_upto + 1, self.last_index + 1)
            if index in self.reads and index not in self.burned and index not in own
        )
        return dict(zip(unread, free))

    def check_start_burn(self, burn: Burn) -> Finding | None:
        """Art. 2.1: the burn at the shoe's start follows the house's policy (none with a machine,
        Art. 2.3)."""
        if self.automatic:
            return None
        indices = sorted(i for i, round_id in self.burned.items() if round_id == "")
        return procedure.check_burn(burn, self.decks, [CARDS[self.reads[i]] for i in indices if i in self.reads])

    def check_round(self, rnd: Round, last_round: LastRound) -> list[Finding]:
        """Art. 2, 7-8: each card of ``rnd``'s hands is the one the shoe read at its index (else a
        switched card), and every card out before the round's last is burned or in a hand; Art. 3.1:
        no more rounds after the cut card than the house plays."""
        found = []
        stand_ins = self.stand_ins(rnd)
        in_hands = set(stand_ins.values())  # the cards out of the shoe that went to this round's hands
        for hand, cards in (("Player", rnd.player), ("Banker", rnd.banker)):
            for dealt in cards:
                read = self.reads.get(dealt.index)
                if read is not None:
                    in_hands.add(dealt.index)
                if read != dealt.card and dealt.card is not None:
                    found.append(self._mismatch(hand, dealt, read, stand_ins.get(dealt.index)))
        indices = [stand_ins.get(i, i) for i in rnd.indices()]
        indices = [i for i in indices if i in self.reads]  # an index never read has no place in the shoe
        if not indices:
            return found
        first, last = min(indices), max(indices)
        self.round_spans += ((first, last),)
        found += self.unaccounted(up_to=last, in_hands=in_hands)
        cut = self.cut_index
        if cut is not None and not self.automatic and first > cut:
            straddled = any(start <= cut < end for start, end in self.round_spans)
            allowed = procedure.rounds_allowed_after_cut(last_round, straddled)
            after = sum(1 for start, _ in self.round_spans if start > cut)
            finding = procedure.check_round_after_cut(last_round, after, allowed, rnd.round_no)
            if finding:
                found.append(finding)
        return found

    def _mismatch(self, hand: str, dealt: HandCard, read: str | None, stand_in: int | None) -> Finding:
        evidence: dict[str, Any] = {"hand": hand.lower(), "index": dealt.index, "in_hand": dealt.card, "shoe_read": read}
        if read is not None:
            what = f"the shoe read the {read}: a switched card"
        elif stand_in is None:
            what = "the shoe never read a card there, and no card out of the shoe is left for it: a card from outside the shoe"
        else:
            stood = self.reads[stand_in]
            evidence["stands_for"] = {"index": stand_in, "card": stood}
            what = f"the shoe never read a card there; the card out of the shoe in its place is card {stand_in}, the {stood}: " + (
                "a wrong shoe index" if stood == dealt.card else "a switched card"
            )
        return Finding(
            AlertCode.CARD_MISMATCH,
            "Art. 7",
            f"The {hand} hand shows the {dealt.card} as card {dealt.index}, but {what}.",
            evidence,
        )

    def unaccounted(self, up_to: int, in_hands: Set[int] = frozenset()) -> list[Finding]:
        """Art. 2, 7-8: cards that left the shoe up to ``up_to`` and are neither burned nor in a
        hand (``in_hands``: the round just checked's; an earlier round's are all at or below
        ``accounted_upto``, as its check judged every card up to its last). Each index is judged
        once."""
        found = []
        start, self.accounted_upto = self.accounted_upto, max(self.accounted_upto, up_to)
        for index in range(start + 1, up_to + 1):
            card = self.reads.get(index)
            if card is None or index in self.burned or index in in_hands:
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

    def open_round(self, demo: bool) -> list[Finding]:
        """A round of this shoe opened. Art. 2.2: at most three demonstration rounds in a shoe,
        all before its first real round."""
        if not demo:
            self.real_rounds += 1
            return []
        self.demo_rounds += 1
        return procedure.check_demo_round(self.demo_rounds, 0, self.real_rounds)


def check_completed_round(rnd: Round, shoe: Shoe | None, last_round: LastRound) -> list[Finding]:
    """Art. 2-13: a completed round played by the rules (``play.check_play``, each card at the
    shoe index it stands for), and its cards against the shoe (``Shoe.check_round``) when the
    shoe is known."""
    assert rnd.declared is not None
    player, banker = rnd.hands(shoe.stand_ins(rnd) if shoe is not None else _NONE)
    found = check_play(player, banker, rnd.declared)
    if shoe is not None:
        found += shoe.check_round(rnd, last_round)
    return found


def check_void(rnd: Round, shoe: Shoe | None) -> Finding:
    """Art. 10 and 4: a voided round, which returned every stake. A void is for a misdeal that
    cannot be corrected (Art. 10): a warning when the round holds one the detectors find (cards
    out of the order of the deal, a hand drawing where it had to stand, a card other than the one
    the shoe read, or one the shoe never read); critical when it holds none, a card exposed face
    up being none (Art. 4: the round and its bets stay valid)."""
    reads = shoe.reads if shoe is not None else {}
    indices = shoe.cards_of(rnd) if shoe is not None else rnd.indices()
    misdeals: list[Finding] = []
    hands: dict[str, list[DealtCard]] = {"Player": [], "Banker": []}
    for hand, cards in (("Player", rnd.player), ("Banker", rnd.banker)):
        for dealt in cards:
            read = reads.get(dealt.index)
            if shoe is not None and read is None:
                misdeals.append(
                    Finding(
                        AlertCode.CARD_MISMATCH,
                        "Art. 7",
                        f"The {hand} hand's card {dealt.index} was never read by the shoe: the round cannot know it.",
                    )
                )
            elif shoe is not None and dealt.card is not None and dealt.card != read:
                misdeals.append(
                    Finding(
                        AlertCode.CARD_MISMATCH,
                        "Art. 7",
                        f"The {hand} hand shows the {dealt.card} as card {dealt.index}; the shoe read the {read}.",
                    )
                )
            card = dealt.card or read
            if card is not None:
                hands[hand].append(DealtCard(dealt.index, CARDS[card]))
    misdeals += check_partial_deal(hands["Player"], hands["Banker"])
    exposed = [{"index": i, "card": reads.get(i)} for i in indices if shoe is not None and i in shoe.exposed]
    stake = rnd.staked()
    evidence: dict[str, Any] = {
        "reason": rnd.void_reason,
        "misdeals": [{"code": str(f.code), "article": f.article, "summary": f.summary} for f in misdeals],
        "exposed": exposed,
        "cards": {"burned_for_the_round": indices}
        if rnd.hands_unreported
        else {"player": [msgspec.to_builtins(c) for c in rnd.player], "banker": [msgspec.to_builtins(c) for c in rnd.banker]},
        "bets": len(rnd.active_bets()),
        "stake": stake,
    }
    said = f"Round {rnd.round_id} was voided ({rnd.void_reason!r})"
    if misdeals:
        found = "; ".join(f"{f.code}: {f.summary}" for f in misdeals)
        summary = (
            f"{said} after a misdeal ({found}); Art. 10 voids a round whose misdeal cannot be corrected: stakes of {stake} were returned."
        )
        return Finding(AlertCode.ROUND_VOIDED, "Art. 10", summary, evidence, graded=Severity.WARNING)
    if exposed:
        shown = ", ".join(f"the {e['card']} (card {e['index']})" for e in exposed)
        summary = (
            f"{said} with only a card exposed face up in it, {shown}: Art. 4 keeps the round and its bets valid and play "
            f"continues, so stakes of {stake} the rules had in play were returned."
        )
        return Finding(AlertCode.ROUND_VOIDED, "Art. 4, 10", summary, evidence, graded=Severity.CRITICAL)
    summary = f"{said} with no misdeal found in it: stakes of {stake} the rules had in play were returned (Art. 10)."
    return Finding(AlertCode.ROUND_VOIDED, "Art. 10", summary, evidence, graded=Severity.CRITICAL)


# ---- checks on the bets (Art. 2.2, 12-16) ----------------------------------------------------


def check_late_bet(rnd: Round, bet: Bet, verb: str) -> Finding | None:
    """Art. 13: no bet is placed, changed or withdrawn once bets are closed."""
    if not (rnd.closed or rnd.ended):
        return None
    return Finding(
        AlertCode.LATE_BET,
        "Art. 13",
        f"A {bet.spot} bet of {bet.amount} by patron {bet.patron_id} was {verb} after bets closed.",
        {"bet_id": bet.bet_id, "spot": str(bet.spot), "amount": bet.amount, "action": verb, "stake": bet.amount},
    )


def check_standing_box(bet: Bet) -> Finding | None:
    """Art. 15: a standing bettor may not bet on the spots reserved for seated bettors: a standing
    bettor's chips in a seat's box. A bet whose box is not said cannot be judged (None)."""
    if bet.seat != STANDING or bet.box is None or bet.box == STANDING:
        return None
    return Finding(
        AlertCode.STANDING_BET_ON_SEAT_BOX,
        "Art. 15",
        f"Standing patron {bet.patron_id} placed a {bet.spot} bet of {bet.amount} in the box of seat {bet.box}, "
        "a spot reserved for seated bettors.",
        {"bet_id": bet.bet_id, "box": bet.box, "seat": bet.seat, "spot": str(bet.spot), "amount": bet.amount, "stake": bet.amount},
    )


def outside_the_table(rnd: Round, place: str) -> bool:
    """Art. 1: whether a seat or a box names a seat the round's table does not have (when it says
    how many it has)."""
    return place != STANDING and rnd.seats is not None and int(place) > rnd.seats


def check_bet_amount(rnd: Round, bet: Bet) -> list[Finding]:
    """House rules: the table minimum, and a Banker bet a multiple of it."""
    findings = money.check_amount(bet.spot, bet.amount, rnd.min_bet)
    for finding in findings:
        finding.evidence["stake"] = bet.amount
    return findings


def check_tie_change(bet: Bet, after: tuple[Spot, int] | None, allowed: frozenset[TieMove], profile: str) -> list[Finding]:
    """Art. 12 and the house profile: a bet carried over from a tie changes (``after``: its new
    spot and amount, or None when withdrawn) only as the house allows, judged against the bet as
    the tie left it."""
    assert bet.carried is not None
    findings = money.check_tie_change(bet.carried, after, allowed, profile)
    for finding in findings:
        finding.evidence["stake"] = bet.amount
    return findings


def check_table_limit(rnd: Round) -> list[Finding]:
    """Art. 14: the Banker/Player difference, and each other spot, within the table limit."""
    totals = money.spot_totals((bet.spot, bet.amount) for bet in rnd.active_bets())
    findings = money.check_table_limit(totals, rnd.max_bet)
    for finding in findings:
        finding.evidence["stake"] = sum(totals.values())
    return findings


def check_late_limit(rnd: Round, bet: Bet, before: tuple[Spot, int] | None) -> list[Finding]:
    """Art. 14 after bets closed: a bet placed, changed or withdrawn late (``before``: its spot
    and amount until then, None for a new bet) must not leave the Banker/Player difference, or a
    side spot, above the table limit and larger than it was before the move."""
    now = money.spot_totals((b.spot, b.amount) for b in rnd.active_bets())
    was = dict(now)
    if not bet.withdrawn:
        was[bet.spot] -= bet.amount
    if before is not None:
        was[before[0]] += before[1]
    findings = []
    for finding in money.check_table_limit(now, rnd.max_bet):
        spot = finding.evidence.get("spot")
        if spot is not None:
            grew = now[spot] > was[spot]
        else:
            grew = abs(now[Spot.BANKER] - now[Spot.PLAYER]) > abs(was[Spot.BANKER] - was[Spot.PLAYER])
        if grew:
            finding.evidence.update(bet_id=bet.bet_id, late=True, stake=sum(now.values()))
            findings.append(finding)
    return findings


def squeeze_stakes(rnd: Round, holder: SqueezeHolder) -> dict[str, dict[str, int]]:
    """Art. 16: the seated bettors' stakes that entitle one to hold the cards, as the house reads
    "the largest bet" (``holder``); standing bettors never hold them."""
    seated = ((bet.patron_id, bet.spot, bet.amount) for bet in rnd.active_bets() if bet.seat != STANDING)
    return money.squeeze_stakes(seated, holder)


def check_squeeze(rnd: Round, allowed: bool, holder: SqueezeHolder = SqueezeHolder.LARGEST_TOTAL) -> Finding | None:
    """Art. 16: the cards held only where the house allows it, and by the seated bettor with the
    largest bet, as the house reads it."""
    if rnd.squeezed_by is None:
        return None
    finding = money.check_squeeze(rnd.squeezed_by, squeeze_stakes(rnd, holder), allowed)
    if finding:
        finding.evidence.update(holder_rule=str(holder), stake=rnd.staked())
    return finding


def decided_bets(rnd: Round) -> list[tuple[Bet, bool]]:
    """Art. 11: each Player or Banker bet of a completed, non-demonstration round that a tie did
    not carry over, and whether it won (for the patrons' win rates)."""
    declared = rnd.declared
    if declared is None or rnd.demo or declared.outcome == _TIE:
        return []
    winner = _WINNING_SPOT[declared.outcome]
    return [(bet, bet.spot == winner) for bet in rnd.active_bets() if bet.spot in _DECIDED_SPOTS]


# ---- checks on the payments (Art. 10, 12, 17, 18) ---------------------------------------------


def check_payment(
    rnd: Round, bet: Bet, paid: Settlement, spot: Spot, amount: int, commission: Commission, rounding: Rounding = Rounding.DOWN
) -> Finding | None:
    """Art. 17-18 (Art. 12 for a carry): a bet paid as the rules pay it, on the spot and amount the
    table recorded."""
    due = rnd.expected_settlement(bet, commission, rounding)
    seen = (spot, amount, paid.result, paid.net, paid.commission)
    expected = (bet.spot, bet.amount, due.result, due.net, due.commission)
    if seen == expected:
        return None
    names = ("spot", "amount", "result", "net", "commission")
    differences = {
        n: {"paid": str(s) if isinstance(s, str) else s, "due": str(e) if isinstance(e, str) else e}
        for n, s, e in zip(names, seen, expected)
        if s != e
    }
    article = "Art. 18" if "commission" in differences else ("Art. 12" if due.result == BetResult.CARRIED else "Art. 17")
    return Finding(
        AlertCode.PAYOUT_MISMATCH,
        article,
        f"Bet {bet.bet_id} ({bet.spot} {bet.amount}) was settled with net {paid.net:+d} and commission "
        f"{paid.commission}; the rules give {due.net:+d} and {due.commission}.",
        {"bet_id": bet.bet_id, "differences": differences, "stake": bet.amount, "difference": paid.net - due.net},
    )


def paid_twice(bet_id: str, patron_id: str, first: str, again: str, net: int, stake: int) -> Finding:
    """Art. 17: a bet is paid once."""
    return Finding(
        AlertCode.DUPLICATE_SETTLEMENT,
        "Art. 17",
        f"Bet {bet_id} of patron {patron_id} was settled again for the same round.",
        {"bet_id": bet_id, "first_settlement": first, "again": again, "net": net, "stake": stake},
    )


def paid_unknown_bet(rnd: Round, bet_id: str, net: int, stake: int) -> Finding:
    """Art. 17: settlement paid a bet the table never recorded (or one withdrawn)."""
    return Finding(
        AlertCode.PAYOUT_MISMATCH,
        "Art. 17",
        f"Settlement paid bet {bet_id}, which the table never recorded on round {rnd.round_id}.",
        {"bet_id": bet_id, "net": net, "stake": stake},
    )


def check_round_totals(rnd: Round, declared: Sequence[int]) -> Finding | None:
    """Art. 17-18: a round's declared totals (staked, paid out, commission, house net) are the sum
    of its bets' settlements."""
    if tuple(declared) == rnd.paid_totals:
        return None
    names = ("staked", "paid_out", "commission", "house_net")
    return Finding(
        AlertCode.PAYOUT_MISMATCH,
        "Art. 17-18",
        f"The settlement totals of round {rnd.round_id} do not add up to its bets' settlements.",
        {
            "differences": {n: {"declared": a, "sum_of_bets": b} for n, a, b in zip(names, declared, rnd.paid_totals) if a != b},
            "stake": rnd.staked(),
        },
    )


def paid_unopened_round(round_id: str, bet_id: str | None, settlement: dict[str, Any], stake: int) -> Finding:
    """Art. 17: settlement paid a bet (or the totals) of a round the table never opened."""
    what = f"bet {bet_id}" if bet_id is not None else "the round"
    return Finding(
        AlertCode.PAYOUT_MISMATCH,
        "Art. 17",
        f"Settlement paid {what} on round {round_id}, which this table never opened.",
        {"settlement": settlement, "stake": stake},
    )


def unpaid_bets(rnd: Round, commission: Commission, rounding: Rounding = Rounding.DOWN) -> list[tuple[Bet, Finding]]:
    """Art. 17: every bet of an ended round is settled; each one that was not, and the finding."""
    found = []
    for bet in rnd.active_bets():
        if bet.bet_id in rnd.paid:
            continue
        due = rnd.expected_settlement(bet, commission, rounding)
        found.append(
            (
                bet,
                Finding(
                    AlertCode.UNSETTLED_BET,
                    "Art. 17",
                    f"Bet {bet.bet_id} ({bet.spot} {bet.amount}) of patron {bet.patron_id} was never settled; "
                    f"the rules give {due.result} with net {due.net:+d}.",
                    {"bet_id": bet.bet_id, "spot": str(bet.spot), "amount": bet.amount, "due_net": due.net, "stake": bet.amount},
                ),
            )
        )
    return found


# Looked up once: on Python 3.11 each ``Spot.PLAYER``-style lookup costs about 0.2 µs, and
# decided_bets asks for every bet of every round.
_DECIDED_SPOTS = frozenset({Spot.PLAYER, Spot.BANKER})
_WINNING_SPOT = {Outcome.PLAYER: Spot.PLAYER, Outcome.BANKER: Spot.BANKER}
_TIE = Outcome.TIE
