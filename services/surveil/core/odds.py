"""Exact probabilities of a round, by enumerating every ordered six-card deal through ``deal``.

The anomaly detectors test outcomes against these figures, and the test suite checks them against
the published counts (docs/rules.md): the dealing code is the oracle's subject, not a shortcut.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction
from functools import cache

from .cards import Card, Rank, Suit
from .money import BetResult, Commission, Spot, settle
from .play import Outcome, RoundResult, deal
from .shoe import CARDS_PER_DECK, check_decks

# One card per point value; outcomes depend only on points (Art. 5).
_BY_POINTS = tuple(Card(rank, Suit.SPADES) for rank in (Rank.TEN, *list(Rank)[:9]))


@dataclass(frozen=True, slots=True)
class OutcomeCounts:
    """Ordered six-card deals from a full shoe, by outcome."""

    banker: int
    player: int
    tie: int

    @property
    def total(self) -> int:
        return self.banker + self.player + self.tie

    def probability(self, outcome: Outcome) -> Fraction:
        return Fraction(getattr(self, outcome.value), self.total)


# outcome_counts(decks) for every shoe Art. 1 allows, as (Banker, Player, Tie): the enumeration's
# own output, kept so the detectors need not spend seconds enumerating at start-up. The test
# suite enumerates again and compares (tests/unit/core/test_odds_exact.py).
OUTCOME_TABLE: dict[int, tuple[int, int, int]] = {
    6: (403095751234560, 392220492728832, 83552962932288),
    7: (1023469376328448, 995884732700032, 212268385833280),
    8: (2292252566437888, 2230518282592256, 475627426473216),
    9: (4665676262757120, 4540095442933632, 968435421769728),
    10: (8807402586035200, 8570454841408000, 1828629499384000),
    11: (15643682376129280, 15222978065896832, 3248754169011648),
    12: (26425038379143168, 25714619121272832, 5488795281294720),
}


def tabled_outcome_counts(decks: int) -> OutcomeCounts:
    """``outcome_counts(decks)`` from ``OUTCOME_TABLE``, without enumerating."""
    return OutcomeCounts(*OUTCOME_TABLE[check_decks(decks)])


@cache
def outcome_counts(decks: int) -> OutcomeCounts:
    """Count every ordered deal of six cards from a full shoe of ``decks`` decks by its outcome.

    A round uses four to six cards; counting all six keeps every deal equally likely, so the
    counts are the published ones (8 decks: 4,998,398,275,503,360 deals in all). The deals are
    grown card by card only as far as ``deal`` reads them: once a round is decided, every way
    to draw the remaining cards of the six counts for its outcome.
    """
    suits = len(Suit)
    in_shoe = [4 * suits * check_decks(decks)] + [suits * decks] * 9  # 10/J/Q/K count 0
    size = sum(in_shoe)
    counts = {outcome: 0 for outcome in Outcome}

    def grow(points: list[int], ways: int) -> None:
        padded = [_BY_POINTS[v] for v in points] + [_BY_POINTS[0]] * (6 - len(points))
        coup = deal(padded)
        if coup.cards_used <= len(points):  # the padding was never read
            completions = 1
            for taken in range(len(points), 6):
                completions *= size - taken
            counts[coup.result.outcome] += ways * completions
            return
        for value in range(10):
            left = in_shoe[value] - points.count(value)
            if left:
                grow([*points, value], ways * left)

    for first_four in itertools.product(range(10), repeat=4):
        ways = 1
        for position, value in enumerate(first_four):
            ways *= in_shoe[value] - first_four[:position].count(value)
        grow(list(first_four), ways)
    return OutcomeCounts(counts[Outcome.BANKER], counts[Outcome.PLAYER], counts[Outcome.TIE])


@cache
def pair_probability(decks: int) -> Fraction:
    """Art. 13: the chance that a hand's first two cards share a rank (8 decks: 31/415)."""
    shoe_size = check_decks(decks) * CARDS_PER_DECK
    per_rank = 4 * decks
    pairs = sum(
        per_rank * (per_rank - 1 if first == second else per_rank)
        for first, second in itertools.product(Rank, repeat=2)
        if _pair_of(first, second)
    )
    return Fraction(pairs, shoe_size * (shoe_size - 1))


def _pair_of(first: Rank, second: Rank) -> bool:
    from .play import is_pair

    return is_pair([Card(first, Suit.SPADES), Card(second, Suit.HEARTS)])


def house_edge(spot: Spot, decks: int = 8, commission: Commission = Commission.FIVE_PERCENT) -> Fraction:
    """The house's expected gain per unit staked, through ``settle`` (Art. 17-18).

    Player and Banker bets are carried on a tie (Art. 12), so a tie costs them nothing.
    Under the no-commission variant the Banker's win on 6 needs the six-card enumeration by
    total, which this function does not do: it covers the 5% commission only for Banker.
    """
    stake = 100 * 20  # large enough that 5% and halves are exact
    if spot in (Spot.PLAYER_PAIR, Spot.BANKER_PAIR):
        p = pair_probability(decks)
        pair = RoundResult(0, 0, Outcome.TIE, True, True)
        no_pair = RoundResult(0, 0, Outcome.TIE, False, False)
        gain = p * settle(spot, stake, pair, commission).net + (1 - p) * settle(spot, stake, no_pair, commission).net
        return -gain / stake
    if spot == Spot.BANKER and commission == Commission.NO_COMMISSION:
        raise ValueError("house_edge covers the no-commission Banker bet only by simulation")
    counts = tabled_outcome_counts(decks)
    gain = Fraction(0)
    for outcome in Outcome:
        banker_total = 7 if outcome is Outcome.BANKER else 0  # any total but 6 pays the same here
        player_total = 7 if outcome == Outcome.PLAYER else 0
        result = RoundResult(player_total, banker_total, outcome, False, False)
        settlement = settle(spot, stake, result, commission)
        if settlement.result != BetResult.CARRIED:
            gain += counts.probability(outcome) * settlement.net
    return -gain / stake
