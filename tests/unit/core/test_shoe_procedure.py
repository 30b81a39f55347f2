"""Shoe procedure: the burn and the cut card (Art. 2.1), demonstration rounds (Art. 2.2), the last
round after the cut card (Art. 3.1)."""

from __future__ import annotations

import pytest

from surveil.core.cards import Card
from surveil.core.findings import AlertCode
from surveil.core.procedure import (
    burn_due,
    check_burn,
    check_cut_card,
    check_demo_round,
    check_round_after_cut,
    rounds_allowed_after_cut,
)
from surveil.core.profiles import Burn, BurnPolicy, LastRound


def burned(first: str, count: int) -> list[Card]:
    """``count`` cards burned, the first of them ``first``."""
    return [Card.parse(first)] + [Card.parse("2C")] * (count - 1)


# ---- (a) as many cards as decks ---------------------------------------------------------


@pytest.mark.parametrize("decks", range(6, 13))
def test_art2_1_a_burn_as_many_cards_as_decks(decks: int) -> None:
    policy = Burn(BurnPolicy.DECKS)
    assert burn_due(policy, decks, Card.parse("9S")) == decks
    assert check_burn(policy, decks, burned("9S", decks)) is None
    for wrong in (decks - 1, decks + 1):
        finding = check_burn(policy, decks, burned("9S", wrong))
        assert finding is not None
        assert (finding.code, finding.article) == (AlertCode.BURN_COUNT, "Art. 2.1")
        assert (finding.evidence["expected_count"], finding.evidence["seen_count"]) == (decks, wrong)


# ---- (b) the first card's face value, the first card counted in the burn ----------------

# first card -> cards burned in all: the shown first card plus as many as its face value, with
# 10, J, Q, K counting 10 (docs/rules.md, Art. 2.1(b)).
FIRST_CARD_BURNS = {
    "AS": 2,
    "2S": 3,
    "3S": 4,
    "4S": 5,
    "5S": 6,
    "6S": 7,
    "7S": 8,
    "8S": 9,
    "9S": 10,
    "10S": 11,
    "JS": 11,
    "QS": 11,
    "KS": 11,
}


@pytest.mark.parametrize(("first", "total"), FIRST_CARD_BURNS.items())
def test_art2_1_b_burn_the_first_card_and_its_face_value(first: str, total: int) -> None:
    policy = Burn(BurnPolicy.FIRST_CARD)
    assert burn_due(policy, 8, Card.parse(first)) == total
    assert check_burn(policy, 8, burned(first, total)) is None


@pytest.mark.parametrize(("first", "total"), FIRST_CARD_BURNS.items())
def test_art2_1_b_forgetting_to_count_the_first_card_is_burn_count(first: str, total: int) -> None:
    policy = Burn(BurnPolicy.FIRST_CARD)
    for wrong in (total - 1, total + 1):
        finding = check_burn(policy, 8, burned(first, wrong))
        assert finding is not None and finding.code is AlertCode.BURN_COUNT
        assert finding.evidence["expected_count"] == total


def test_art2_1_b_a_king_is_10_not_0_for_the_burn() -> None:
    """A K is worth 0 in play (Art. 5) but 10 for the burn: burning only the K is wrong."""
    assert check_burn(Burn(BurnPolicy.FIRST_CARD), 8, burned("KH", 1)) is not None


def test_art2_1_b_no_burn_at_all_is_burn_count() -> None:
    finding = check_burn(Burn(BurnPolicy.FIRST_CARD), 8, [])
    assert finding is not None and finding.code is AlertCode.BURN_COUNT


# ---- (c) a fixed number from 1 to 8 -----------------------------------------------------


@pytest.mark.parametrize("count", range(1, 9))
def test_art2_1_c_burn_a_fixed_number(count: int) -> None:
    policy = Burn(BurnPolicy.FIXED, count)
    assert burn_due(policy, 8, Card.parse("KS")) == count  # the first card does not matter
    assert burn_due(policy, 12, None) == count
    assert check_burn(policy, 8, burned("KS", count)) is None
    finding = check_burn(policy, 8, burned("KS", count + 1))
    assert finding is not None and finding.code is AlertCode.BURN_COUNT
    assert f"fixed {count}" in finding.summary


@pytest.mark.parametrize("count", [0, 9, -1, None])
def test_art2_1_c_a_fixed_burn_outside_1_to_8_is_refused(count: int | None) -> None:
    with pytest.raises(ValueError, match="from 1 to 8"):
        Burn(BurnPolicy.FIXED, count)


# ---- the cut card -----------------------------------------------------------------------


@pytest.mark.parametrize("decks", [6, 8, 12])
def test_art2_1_at_least_12_cards_behind_the_cut_card(decks: int) -> None:
    size = 52 * decks
    assert check_cut_card(decks, size - 12) is None
    assert check_cut_card(decks, size - 60) is None
    finding = check_cut_card(decks, size - 11)
    assert finding is not None
    assert (finding.code, finding.article) == (AlertCode.CUT_CARD_DEPTH, "Art. 2.1")
    assert finding.evidence["cards_behind"] == 11


def test_art2_1_a_cut_card_at_the_very_end_is_cut_card_depth() -> None:
    finding = check_cut_card(8, 416)
    assert finding is not None and finding.evidence["cards_behind"] == 0


# ---- demonstration rounds ---------------------------------------------------------------


@pytest.mark.parametrize("demo_round", [1, 2, 3])
def test_art2_2_up_to_3_demonstration_rounds_without_bets(demo_round: int) -> None:
    assert check_demo_round(demo_round, bets=0) == []


@pytest.mark.parametrize("demo_round", [4, 5, 10])
def test_art2_2_a_fourth_demonstration_round_is_demo_rounds(demo_round: int) -> None:
    findings = check_demo_round(demo_round, bets=0)
    assert [(f.code, f.article) for f in findings] == [(AlertCode.DEMO_ROUNDS, "Art. 2.2")]
    assert findings[0].evidence == {"demo_rounds": demo_round, "maximum": 3}


def test_art2_2_a_demonstration_round_takes_no_bets() -> None:
    findings = check_demo_round(1, bets=2)
    assert [f.code for f in findings] == [AlertCode.DEMO_ROUNDS]
    assert findings[0].evidence == {"bets": 2}


def test_art2_2_too_many_demonstration_rounds_with_bets_is_two_findings() -> None:
    assert [f.code for f in check_demo_round(4, bets=1)] == [AlertCode.DEMO_ROUNDS] * 2


# ---- the last round (Art. 3.1) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "round_in_progress", "allowed"),
    [
        # "the round in progress is the last round"
        (LastRound.FINISH, True, 0),
        (LastRound.FINISH, False, 1),  # no round in progress: the next one is the last
        # "or at most one more round may be played"
        (LastRound.ONE_MORE, True, 1),
        (LastRound.ONE_MORE, False, 2),
    ],
)
def test_art3_1_rounds_allowed_after_the_cut_card(policy: LastRound, round_in_progress: bool, allowed: int) -> None:
    assert rounds_allowed_after_cut(policy, round_in_progress) == allowed


@pytest.mark.parametrize("policy", list(LastRound))
def test_art3_1_a_round_beyond_the_allowance_is_rounds_after_cut_card(policy: LastRound) -> None:
    allowed = rounds_allowed_after_cut(policy, round_in_progress=True)
    assert check_round_after_cut(policy, allowed, allowed, round_no=60) is None
    finding = check_round_after_cut(policy, allowed + 1, allowed, round_no=61)
    assert finding is not None
    assert (finding.code, finding.article) == (AlertCode.ROUNDS_AFTER_CUT_CARD, "Art. 3.1")
    assert finding.evidence["round_no"] == 61


def test_art2_2_a_demonstration_round_after_a_real_round_is_demo_rounds() -> None:
    assert check_demo_round(1, 0, real_rounds=0) == []
    [finding] = check_demo_round(1, 0, real_rounds=2)
    assert (finding.code, finding.article) == (AlertCode.DEMO_ROUNDS, "Art. 2.2")
    assert finding.evidence == {"demo_rounds": 1, "real_rounds_before": 2}
