"""Art. 9, case by case: the Player rule and the full Banker tableau.

The expected decisions and clauses come from ``transcribed_rules`` (docs/rules.md, Art. 9 written out
by hand, cross-checked against the clauses of the Chinese text), never from the code under test.
Each case is checked against ``player_rule``/``banker_rule``, the flat ``PLAYER_DRAWS`` /
``BANKER_DRAWS`` lookups and ``deal()``.
"""

from __future__ import annotations

import pytest
from transcribed_rules import (
    ART5_POINTS,
    BANKER_CLAUSES,
    BANKER_GRID,
    BANKER_NATURALS,
    PLAYER_DRAW_TOTALS,
    PLAYER_GRID,
    PLAYER_NATURAL_ARTICLE,
    PLAYER_NATURALS,
    PLAYER_STAND_TOTALS,
    RANK_OF_POINTS,
    STOOD,
    BankerClause,
    total_of,
)

from surveil.core.cards import Card, Rank
from surveil.core.play import BANKER_DRAWS, PLAYER_DRAWS, DrawRule, Outcome, banker_rule, deal, player_rule

STOOD_INDEX = 10  # BANKER_DRAWS[banker_two][10]: the Player did not draw
BANKER_COLUMNS: list[int | str] = [*range(10), STOOD]


def cards_worth(points: int) -> list[Card]:
    """Every card of one suit worth ``points`` (0: 10, J, Q, K)."""
    return [Card.parse(f"{rank}S") for rank, value in ART5_POINTS.items() if value == points]


def two_cards_totalling(total: int, suit: str) -> list[Card]:
    """A two-card hand with this total: the card worth ``total`` and a K."""
    return [Card.parse(f"{RANK_OF_POINTS[total]}{suit}"), Card.parse(f"K{suit}")]


# ---- the transcriptions themselves ------------------------------------------------------


def test_art9_grid_letters_match_their_clauses() -> None:
    """In the hand-written grids, D goes with Art. 9(1)/(3) and S with Art. 9(2)/(4)."""
    for row in PLAYER_GRID.values():
        for cell in row.values():
            assert cell.article == ("Art. 9(1)" if cell.draws else "Art. 9(2)")
    for banker_row in BANKER_GRID.values():
        for cell in banker_row.values():
            assert cell.article.startswith("Art. 9(3)(" if cell.draws else "Art. 9(4)(")


def test_art9_1_2_player_grid_agrees_with_the_zh_clauses() -> None:
    """Art. 9(一): draws on 1-5 or 10 (= 0); 9(二): stands on 6-9 or against a Banker 8/9."""
    assert PLAYER_DRAW_TOTALS == {0, 1, 2, 3, 4, 5}
    assert PLAYER_STAND_TOTALS == {6, 7, 8, 9}
    assert BANKER_NATURALS == PLAYER_NATURALS == {8, 9}
    for p in range(10):
        for b in range(10):
            draws = p in PLAYER_DRAW_TOTALS and b not in BANKER_NATURALS
            assert PLAYER_GRID[p][b].draws is draws, (p, b)


def _covering(banker_two: int, column: int | str) -> list[BankerClause]:
    return [
        clause
        for clause in BANKER_CLAUSES
        if banker_two in clause.banker_totals and (clause.stood if column == STOOD else column in clause.thirds)
    ]


def test_art9_3_4_banker_grid_agrees_with_the_zh_clauses() -> None:
    """Every cell of the hand-written Banker grid (docs/rules.md) is covered by exactly one clause
    of the Chinese Art. 9(三)/(四), with the same decision and clause number; every clause is used."""
    used = set()
    for b in range(10):
        for column in BANKER_COLUMNS:
            covering = _covering(b, column)
            assert len(covering) == 1, (b, column, [c.article for c in covering])
            clause = covering[0]
            assert (clause.article, clause.draws) == (BANKER_GRID[b][column].article, BANKER_GRID[b][column].draws)
            used.add(clause.article)
    assert used == {clause.article for clause in BANKER_CLAUSES}


# ---- the Player rule --------------------------------------------------------------------


@pytest.mark.parametrize("banker_two", range(10))
@pytest.mark.parametrize("player_two", range(10))
def test_art9_1_2_player_rule_case_by_case(player_two: int, banker_two: int) -> None:
    cell = PLAYER_GRID[player_two][banker_two]
    assert player_rule(player_two, banker_two) == DrawRule(cell.draws, cell.article)
    assert PLAYER_DRAWS[player_two][banker_two] is cell.draws


def test_art9_1_player_draws_on_0_to_5() -> None:
    for p in range(6):
        for b in range(8):
            assert player_rule(p, b) == DrawRule(True, "Art. 9(1)")


def test_art9_2_player_stands_on_6_or_7() -> None:
    for p in (6, 7):
        for b in range(10):
            assert player_rule(p, b) == DrawRule(False, "Art. 9(2)")


def test_art9_2_nobody_draws_when_either_hand_has_a_natural() -> None:
    for p in range(10):
        for b in range(10):
            if p >= 8 or b >= 8:
                assert player_rule(p, b) == DrawRule(False, "Art. 9(2)")
                if p >= 8:
                    assert not banker_rule(b, p, None).draws


# ---- the Banker tableau -----------------------------------------------------------------


def _player_totals_for(banker_two: int, column: int | str) -> list[int]:
    """The Player two-card totals (no natural) with which the case can arise in play."""
    if column != STOOD:
        return [0, 1, 2, 3, 4, 5]  # the Player drew
    return [0, 1, 2, 3, 4, 5, 6, 7] if banker_two >= 8 else [6, 7]  # he stood


@pytest.mark.parametrize("column", BANKER_COLUMNS, ids=lambda c: f"third{c}" if c != STOOD else "stood")
@pytest.mark.parametrize("banker_two", range(10), ids=lambda b: f"banker{b}")
def test_art9_3_4_banker_rule_case_by_case(banker_two: int, column: int | str) -> None:
    cell = BANKER_GRID[banker_two][column]
    thirds: list[Card | None] = [None] if column == STOOD else [*cards_worth(int(column))]
    for player_two in _player_totals_for(banker_two, column):
        for third in thirds:
            assert banker_rule(banker_two, player_two, third) == DrawRule(cell.draws, cell.article), (player_two, third)
    assert BANKER_DRAWS[banker_two][STOOD_INDEX if column == STOOD else int(column)] is cell.draws


@pytest.mark.parametrize("banker_two", range(10))
@pytest.mark.parametrize("player_two", sorted(PLAYER_NATURALS))
def test_art9_4_6_banker_stands_when_the_player_has_a_natural(player_two: int, banker_two: int) -> None:
    # Art. 9(4)(6) applies; on a Banker 7-9, 9(4)(5) applies as well, so either clause is right.
    applicable = {PLAYER_NATURAL_ARTICLE} | ({"Art. 9(4)(5)"} if banker_two >= 7 else set())
    rule = banker_rule(banker_two, player_two, None)
    assert rule.draws is False
    assert rule.article in applicable


# One test per clause of Art. 9(3) and (4): the clause banker_rule names is the paragraph of the
# text that covers the case (coverage parsed from the Chinese clause, see transcribed_rules).


def _assert_clause(article: str) -> None:
    (clause,) = [c for c in BANKER_CLAUSES if c.article == article]
    cases = 0
    for b in sorted(clause.banker_totals):
        columns: list[int | str] = [*sorted(clause.thirds), *([STOOD] if clause.stood else [])]
        for column in columns:
            for player_two in _player_totals_for(b, column):
                third = None if column == STOOD else cards_worth(int(column))[0]
                assert banker_rule(b, player_two, third) == DrawRule(clause.draws, article), (b, player_two, third)
                cases += 1
    assert cases


def test_art9_3_1_banker_draws_on_0_1_2_whatever_the_player_drew() -> None:
    _assert_clause("Art. 9(3)(1)")


def test_art9_3_2_banker_draws_on_3_unless_player_third_is_8() -> None:
    _assert_clause("Art. 9(3)(2)")


def test_art9_3_3_banker_draws_on_4_against_2_to_7() -> None:
    _assert_clause("Art. 9(3)(3)")


def test_art9_3_4_banker_draws_on_5_against_4_to_7() -> None:
    _assert_clause("Art. 9(3)(4)")


def test_art9_3_5_banker_draws_on_6_against_6_or_7() -> None:
    _assert_clause("Art. 9(3)(5)")


def test_art9_3_6_banker_draws_on_0_to_5_when_the_player_stood() -> None:
    _assert_clause("Art. 9(3)(6)")


def test_art9_4_1_banker_stands_on_3_against_8() -> None:
    _assert_clause("Art. 9(4)(1)")


def test_art9_4_2_banker_stands_on_4_against_a_8_9_0() -> None:
    _assert_clause("Art. 9(4)(2)")


def test_art9_4_3_banker_stands_on_5_against_a_2_3_8_9_0() -> None:
    _assert_clause("Art. 9(4)(3)")


def test_art9_4_4_banker_stands_on_6_unless_player_third_is_6_or_7() -> None:
    _assert_clause("Art. 9(4)(4)")


def test_art9_4_5_banker_stands_on_7_8_9() -> None:
    _assert_clause("Art. 9(4)(5)")


def test_art9_face_cards_count_as_the_10_of_the_tableau() -> None:
    """ "10" in Art. 9 is any card worth 0: 10, J, Q and K decide alike (Banker 4 stands on each)."""
    for code in ("10H", "JH", "QH", "KH"):
        assert banker_rule(4, 2, Card.parse(code)) == DrawRule(False, "Art. 9(4)(2)")
        assert banker_rule(3, 2, Card.parse(code)) == DrawRule(True, "Art. 9(3)(2)")


# ---- deal() plays every case of the tableau ---------------------------------------------


@pytest.mark.parametrize("column", BANKER_COLUMNS, ids=lambda c: f"third{c}" if c != STOOD else "stood")
@pytest.mark.parametrize("banker_two", range(10), ids=lambda b: f"banker{b}")
def test_art7_9_deal_follows_the_tableau(banker_two: int, column: int | str) -> None:
    """Art. 7: P, B, P, B, then the Player's third card, then the Banker's; Art. 9: who draws."""
    for player_two in range(10):
        player_cell = PLAYER_GRID[player_two][banker_two]
        if player_cell.draws == (column == STOOD):
            continue  # this Player total cannot reach this column
        p1, p2 = two_cards_totalling(player_two, "S")
        b1, b2 = two_cards_totalling(banker_two, "H")
        fifth = cards_worth(0 if column == STOOD else int(column))[0]
        sixth = Card.parse("5D")
        shoe = [p1, b1, p2, b2, fifth, sixth, Card.parse("9C")]
        coup = deal(shoe)
        player = [p1, p2, *([fifth] if player_cell.draws else [])]
        banker_draws = player_two not in PLAYER_NATURALS and BANKER_GRID[banker_two][column].draws
        banker_third = sixth if player_cell.draws else fifth
        banker = [b1, b2, *([banker_third] if banker_draws else [])]
        assert (list(coup.player), list(coup.banker)) == (player, banker), player_two
        player_total = total_of([c.rank.value for c in player])
        banker_total = total_of([c.rank.value for c in banker])
        assert (coup.result.player_total, coup.result.banker_total) == (player_total, banker_total)
        assert coup.cards_used == len(player) + len(banker)


def test_art9_deal_draws_at_most_one_card_each() -> None:
    """Banker 0 and Player 0: both draw, once each, whatever follows."""
    zeros = [Card.parse("KS")] * 10
    coup = deal(zeros)
    assert (len(coup.player), len(coup.banker)) == (3, 3)
    assert coup.result.outcome is Outcome.TIE


def test_art5_face_cards_are_one_rank_each() -> None:
    # sanity of the oracle used above: every rank of the contract has a value
    assert set(ART5_POINTS) == {rank.value for rank in Rank}
