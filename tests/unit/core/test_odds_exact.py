"""The exhaustive enumeration against the published figures (docs/rules.md, "Reference figures").

Like perft counts for a chess move generator: ``outcome_counts`` drives every ordered six-card
deal through ``deal``, so a single wrong cell of the tableau moves these counts. About 6 s per
deck count.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from surveil.core.money import Spot
from surveil.core.odds import OutcomeCounts, house_edge, outcome_counts, pair_probability
from surveil.core.play import Outcome

PUBLISHED = {
    8: OutcomeCounts(banker=2_292_252_566_437_888, player=2_230_518_282_592_256, tie=475_627_426_473_216),
    6: OutcomeCounts(banker=403_095_751_234_560, player=392_220_492_728_832, tie=83_552_962_932_288),
}
PUBLISHED_TOTAL = {8: 4_998_398_275_503_360, 6: 878_869_206_895_680}


@pytest.mark.parametrize("decks", [8, 6])
def test_art9_exact_enumeration_reproduces_the_published_counts(decks: int) -> None:
    counts = outcome_counts(decks)
    assert counts == PUBLISHED[decks]
    assert counts.total == PUBLISHED_TOTAL[decks]


def test_art9_published_probabilities_8_decks() -> None:
    counts = outcome_counts(8)
    assert round(float(counts.probability(Outcome.BANKER)), 6) == 0.458597
    assert round(float(counts.probability(Outcome.PLAYER)), 6) == 0.446247
    assert round(float(counts.probability(Outcome.TIE)), 6) == 0.095156
    assert sum(counts.probability(o) for o in Outcome) == 1


def test_art9_total_is_every_ordered_six_card_deal() -> None:
    for decks, total in PUBLISHED_TOTAL.items():
        n = 52 * decks
        assert total == n * (n - 1) * (n - 2) * (n - 3) * (n - 4) * (n - 5)


def test_art13_pair_probability_8_decks_is_31_over_415() -> None:
    assert pair_probability(8) == Fraction(31, 415)
    assert round(float(pair_probability(8)), 6) == 0.074699


def test_art13_pair_probability_counts_rank_not_value() -> None:
    """J+Q is no pair (Art. 13): 13 ranks, so (4d-1)/(52d-1), not the 16/52 of 'value' pairs."""
    for decks in (6, 8, 12):
        assert pair_probability(decks) == Fraction(4 * decks - 1, 52 * decks - 1)


@pytest.mark.parametrize(
    ("spot", "published_percent"),
    [(Spot.BANKER, "1.06"), (Spot.PLAYER, "1.24"), (Spot.TIE, "14.36"), (Spot.PLAYER_PAIR, "10.36"), (Spot.BANKER_PAIR, "10.36")],
)
def test_art17_18_house_edges_8_decks_as_published(spot: Spot, published_percent: str) -> None:
    assert f"{float(house_edge(spot, 8) * 100):.2f}" == published_percent
