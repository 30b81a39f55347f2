"""Money: payouts (Art. 17), commission (Art. 18), ties (Art. 12) and the bet checks (Art. 12-16,
house rules). Amounts are integers; the expected figures are worked out by hand."""

from __future__ import annotations

import pytest

from surveil.core.findings import AlertCode
from surveil.core.money import (
    CARRY,
    VOID,
    BetResult,
    Commission,
    Rounding,
    Settlement,
    Spot,
    SqueezeHolder,
    TieMove,
    check_amount,
    check_squeeze,
    check_table_limit,
    check_tie_change,
    settle,
    spot_totals,
    squeeze_stakes,
    tie_moves,
)
from surveil.core.play import Outcome, RoundResult
from surveil.core.profiles import load_profile

FIVE = Commission.FIVE_PERCENT
NO_COMMISSION = Commission.NO_COMMISSION

PLAYER_WINS = RoundResult(7, 5, Outcome.PLAYER, False, False)
BANKER_WINS = RoundResult(5, 7, Outcome.BANKER, False, False)
TIE = RoundResult(6, 6, Outcome.TIE, False, False)
RESULTS = {"player": PLAYER_WINS, "banker": BANKER_WINS, "tie": TIE}

WIN, LOSE, CARRIED, PUSH = BetResult.WIN, BetResult.LOSE, BetResult.CARRIED, BetResult.PUSH

# A bet of 100 on each spot x each outcome, no pairs dealt (Art. 12, 17, 18).
# (result, net, commission)
SETTLEMENTS_OF_100 = {
    (Spot.PLAYER, "player"): (WIN, 100, 0),  # 1 to 1
    (Spot.PLAYER, "banker"): (LOSE, -100, 0),
    (Spot.PLAYER, "tie"): (CARRIED, 0, 0),  # Art. 12: neither wins nor loses
    (Spot.BANKER, "player"): (LOSE, -100, 0),
    (Spot.BANKER, "banker"): (WIN, 95, 5),  # 1 to 1 less 5% commission
    (Spot.BANKER, "tie"): (CARRIED, 0, 0),
    (Spot.TIE, "player"): (LOSE, -100, 0),
    (Spot.TIE, "banker"): (LOSE, -100, 0),
    (Spot.TIE, "tie"): (WIN, 800, 0),  # 8 to 1
    (Spot.PLAYER_PAIR, "player"): (LOSE, -100, 0),
    (Spot.PLAYER_PAIR, "banker"): (LOSE, -100, 0),
    (Spot.PLAYER_PAIR, "tie"): (LOSE, -100, 0),  # a pair bet is not carried on a tie
    (Spot.BANKER_PAIR, "player"): (LOSE, -100, 0),
    (Spot.BANKER_PAIR, "banker"): (LOSE, -100, 0),
    (Spot.BANKER_PAIR, "tie"): (LOSE, -100, 0),
}


@pytest.mark.parametrize(("spot", "outcome"), SETTLEMENTS_OF_100)
def test_art12_17_18_every_spot_against_every_outcome(spot: Spot, outcome: str) -> None:
    assert settle(spot, 100, RESULTS[outcome], FIVE) == Settlement(*SETTLEMENTS_OF_100[spot, outcome])


@pytest.mark.parametrize("outcome", RESULTS)
@pytest.mark.parametrize(
    ("spot", "player_pair", "banker_pair", "wins"),
    [
        (Spot.PLAYER_PAIR, True, False, True),
        (Spot.PLAYER_PAIR, False, True, False),  # the other hand's pair
        (Spot.PLAYER_PAIR, True, True, True),
        (Spot.BANKER_PAIR, False, True, True),
        (Spot.BANKER_PAIR, True, False, False),
        (Spot.BANKER_PAIR, True, True, True),
    ],
)
def test_art13_17_a_pair_pays_11_to_1_whatever_the_outcome(
    spot: Spot, player_pair: bool, banker_pair: bool, wins: bool, outcome: str
) -> None:
    base = RESULTS[outcome]
    result = RoundResult(base.player_total, base.banker_total, base.outcome, player_pair, banker_pair)
    expected = Settlement(WIN, 1100, 0) if wins else Settlement(LOSE, -100, 0)
    assert settle(spot, 100, result, FIVE) == expected


@pytest.mark.parametrize(
    ("amount", "net", "commission"),
    [
        (100, 95, 5),
        (1000, 950, 50),
        (20, 19, 1),
        (30, 29, 1),  # 1.5 commission: rounded down, the house never takes more than 5%
        (39, 38, 1),  # 1.95 -> 1
        (10, 10, 0),  # 0.5 -> 0
        (500, 475, 25),
        (200_000, 190_000, 10_000),
        (1, 1, 0),
    ],
)
def test_art18_five_percent_commission_on_a_banker_win_rounded_down(amount: int, net: int, commission: int) -> None:
    settlement = settle(Spot.BANKER, amount, BANKER_WINS, FIVE)
    assert settlement == Settlement(WIN, net, commission)
    assert settlement.net + settlement.commission == amount  # the commission comes out of the 1:1 win


@pytest.mark.parametrize(
    ("banker_total", "amount", "net"),
    [
        (6, 100, 50),  # a Banker 6 pays half
        (6, 1000, 500),
        (6, 25, 12),  # half of an odd amount, rounded down
        (7, 100, 100),  # every other Banker win pays 1:1, no commission
        (9, 100, 100),
        (1, 100, 100),
    ],
)
def test_art18_no_commission_banker_6_pays_half(banker_total: int, amount: int, net: int) -> None:
    result = RoundResult(0, banker_total, Outcome.BANKER, False, False)
    assert settle(Spot.BANKER, amount, result, NO_COMMISSION) == Settlement(WIN, net, 0)


@pytest.mark.parametrize(("spot", "outcome"), SETTLEMENTS_OF_100)
def test_art18_no_commission_changes_only_the_banker_win(spot: Spot, outcome: str) -> None:
    expected = Settlement(*SETTLEMENTS_OF_100[spot, outcome])
    if (spot, outcome) == (Spot.BANKER, "banker"):
        expected = Settlement(WIN, 100, 0)  # Banker 7: 1:1
    assert settle(spot, 100, RESULTS[outcome], NO_COMMISSION) == expected


def test_art18_no_commission_tie_on_6_carries_banker_bets() -> None:
    assert settle(Spot.BANKER, 100, RoundResult(6, 6, Outcome.TIE, False, False), NO_COMMISSION) == CARRY


def test_art10_a_voided_round_returns_every_stake() -> None:
    assert VOID == Settlement(PUSH, 0, 0)
    assert VOID.paid_out(100) == 100


@pytest.mark.parametrize(
    ("settlement", "amount", "paid_out"),
    [
        (Settlement(WIN, 95, 5), 100, 195),  # stake back and winnings
        (Settlement(WIN, 800, 0), 100, 900),  # a Tie win
        (Settlement(WIN, 1100, 0), 100, 1200),  # a pair win
        (Settlement(LOSE, -100, 0), 100, 0),
        (CARRY, 100, 0),  # the stake stays on the table for the next round
        (VOID, 250, 250),
    ],
)
def test_art17_paid_out_is_stake_and_winnings(settlement: Settlement, amount: int, paid_out: int) -> None:
    assert settlement.paid_out(amount) == paid_out


@pytest.mark.parametrize("commission", list(Commission))
@pytest.mark.parametrize("pairs", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("totals", [(7, 5), (5, 7), (6, 6), (3, 6)])
@pytest.mark.parametrize("spot", list(Spot))
def test_money_is_compared_by_value_plain_strings_settle_as_the_enums(
    spot: Spot, totals: tuple[int, int], pairs: tuple[bool, bool], commission: Commission
) -> None:
    player, banker = totals
    outcome = Outcome.PLAYER if player > banker else Outcome.BANKER if banker > player else Outcome.TIE
    enums = RoundResult(player, banker, outcome, *pairs)
    plain = RoundResult(player, banker, str(outcome.value), *pairs)  # type: ignore[arg-type]
    expected = settle(spot, 1000, enums, commission)
    paid = settle(str(spot.value), 1000, plain, str(commission.value))  # type: ignore[arg-type]
    assert paid == expected
    assert paid.paid_out(1000) == expected.paid_out(1000)
    plain_settlement = Settlement(str(expected.result.value), expected.net, expected.commission)  # type: ignore[arg-type]
    assert plain_settlement.paid_out(1000) == expected.paid_out(1000)
    assert check_amount(str(spot.value), 1200, 500) == check_amount(spot, 1200, 500)  # type: ignore[arg-type]


# ---- bet amounts (house rules in the closing notes) -------------------------------------


def test_house_rules_a_bet_below_the_minimum() -> None:
    for spot in Spot:
        findings = check_amount(spot, 400, 500)
        assert AlertCode.BET_BELOW_MINIMUM in [f.code for f in findings]
        assert findings[0].evidence == {"spot": str(spot), "amount": 400, "min_bet": 500}


@pytest.mark.parametrize("amount", [500, 1000, 1500, 200_000])
def test_house_rules_a_banker_bet_is_a_multiple_of_the_minimum(amount: int) -> None:
    assert check_amount(Spot.BANKER, amount, 500) == []


@pytest.mark.parametrize("amount", [501, 750, 1499])
def test_house_rules_a_banker_bet_not_a_multiple_is_banker_bet_multiple(amount: int) -> None:
    assert [f.code for f in check_amount(Spot.BANKER, amount, 500)] == [AlertCode.BANKER_BET_MULTIPLE]


@pytest.mark.parametrize("spot", [Spot.PLAYER, Spot.TIE, Spot.PLAYER_PAIR, Spot.BANKER_PAIR])
def test_house_rules_other_bets_only_need_the_minimum(spot: Spot) -> None:
    assert check_amount(spot, 750, 500) == []
    assert check_amount(spot, 501, 500) == []


def test_house_rules_a_small_odd_banker_bet_breaks_both_rules() -> None:
    assert [f.code for f in check_amount(Spot.BANKER, 300, 500)] == [
        AlertCode.BET_BELOW_MINIMUM,
        AlertCode.BANKER_BET_MULTIPLE,
    ]


# ---- the table limit (Art. 14) ----------------------------------------------------------


def totals(**amounts: int) -> dict[Spot, int]:
    return spot_totals((Spot(spot), amount) for spot, amount in amounts.items())


def test_spot_totals_adds_bets_per_spot() -> None:
    bets = [(Spot.BANKER, 100), (Spot.BANKER, 50), (Spot.TIE, 20)]
    assert spot_totals(bets) == {Spot.PLAYER: 0, Spot.BANKER: 150, Spot.TIE: 20, Spot.PLAYER_PAIR: 0, Spot.BANKER_PAIR: 0}


def test_art14_the_limit_applies_to_the_banker_player_difference() -> None:
    # 300,000 on Banker against 150,000 on Player: only 150,000 is at risk for the house.
    assert check_table_limit(totals(banker=300_000, player=150_000), 200_000) == []
    assert check_table_limit(totals(banker=200_000), 200_000) == []  # exactly the limit
    assert check_table_limit(totals(player=500_000, banker=300_001), 200_000) == []


@pytest.mark.parametrize(("banker", "player"), [(300_000, 50_000), (0, 200_001), (450_000, 200_000)])
def test_art14_a_difference_above_the_limit_is_table_limit(banker: int, player: int) -> None:
    findings = check_table_limit(totals(banker=banker, player=player), 200_000)
    assert [(f.code, f.article) for f in findings] == [(AlertCode.TABLE_LIMIT, "Art. 14")]
    assert findings[0].evidence["difference"] == abs(banker - player)


@pytest.mark.parametrize("spot", ["tie", "player_pair", "banker_pair"])
def test_art14_tie_and_pairs_each_up_to_the_limit(spot: str) -> None:
    assert check_table_limit(totals(**{spot: 200_000}), 200_000) == []
    findings = check_table_limit(totals(**{spot: 200_001}), 200_000)
    assert [f.code for f in findings] == [AlertCode.TABLE_LIMIT]
    assert findings[0].evidence == {"spot": spot, "total": 200_001, "max_bet": 200_000}


def test_art14_tie_is_not_offset_by_banker_or_player() -> None:
    findings = check_table_limit(totals(tie=250_000, banker=250_000, player=250_000), 200_000)
    assert [f.evidence.get("spot") for f in findings] == ["tie"]


# ---- bets carried over from a tie (Art. 12, house profiles) ------------------------------

KEEP = (Spot.BANKER, 1000), (Spot.BANKER, 1000)
INCREASE = (Spot.BANKER, 1000), (Spot.BANKER, 3000)
REDUCE = (Spot.BANKER, 1000), (Spot.BANKER, 500)
MOVE = (Spot.BANKER, 1000), (Spot.PLAYER, 1000)
MOVE_AND_REDUCE = (Spot.PLAYER, 1000), (Spot.BANKER, 500)
MOVE_AND_INCREASE = (Spot.PLAYER, 1000), (Spot.BANKER, 2000)
WITHDRAW: tuple[tuple[Spot, int], None] = (Spot.PLAYER, 1000), None

CHANGES = {
    "keep": KEEP,
    "increase": INCREASE,
    "reduce": REDUCE,
    "move": MOVE,
    "move_and_reduce": MOVE_AND_REDUCE,
    "move_and_increase": MOVE_AND_INCREASE,
    "withdraw": WITHDRAW,
}


def test_art12_what_a_change_amounts_to() -> None:
    assert tie_moves(*KEEP) == {TieMove.KEEP}
    assert tie_moves(*INCREASE) == {TieMove.INCREASE}
    assert tie_moves(*REDUCE) == {TieMove.REDUCE}
    assert tie_moves(*MOVE) == {TieMove.MOVE}
    assert tie_moves(*MOVE_AND_REDUCE) == {TieMove.MOVE, TieMove.REDUCE}
    assert tie_moves(*MOVE_AND_INCREASE) == {TieMove.MOVE, TieMove.INCREASE}
    assert tie_moves(*WITHDRAW) == {TieMove.WITHDRAW}


@pytest.mark.parametrize("change", CHANGES)
def test_art12_dicj_allows_every_change_after_a_tie(change: str) -> None:
    """Art. 12: withdraw (1), keep (2), increase or reduce (3)(a), move (3)(b)."""
    profile = load_profile("dicj")
    assert check_tie_change(*CHANGES[change], profile.after_tie, profile.name) == []


SJM_FINDINGS = {
    "keep": [],
    "increase": [],
    "reduce": [(AlertCode.TIE_BET_REDUCED, "Art. 12(3)(a)")],
    "move": [(AlertCode.TIE_BET_MOVED, "Art. 12(3)(b)")],
    "move_and_reduce": [(AlertCode.TIE_BET_MOVED, "Art. 12(3)(b)"), (AlertCode.TIE_BET_REDUCED, "Art. 12(3)(a)")],
    "move_and_increase": [(AlertCode.TIE_BET_MOVED, "Art. 12(3)(b)")],
    "withdraw": [(AlertCode.TIE_BET_WITHDRAWN, "Art. 12(1)")],
}


@pytest.mark.parametrize("change", CHANGES)
def test_art12_sjm_allows_only_keeping_or_adding_after_a_tie(change: str) -> None:
    """SJM house rule (closing notes): after a tie a bettor may only add to the bet."""
    profile = load_profile("sjm")
    findings = check_tie_change(*CHANGES[change], profile.after_tie, profile.name)
    assert [(f.code, f.article) for f in findings] == SJM_FINDINGS[change]
    for finding in findings:
        assert "sjm" in finding.summary
        assert finding.evidence["allowed"] == ["increase", "keep"]


def test_art12_withdrawn_evidence_names_before_and_after() -> None:
    (finding,) = check_tie_change(*WITHDRAW, load_profile("sjm").after_tie, "sjm")
    assert finding.evidence["before"] == {"spot": "player", "amount": 1000}
    assert finding.evidence["after"] is None


# ---- squeezing (Art. 16) ----------------------------------------------------------------

STAKES = {"round": {"p1": 5000, "p2": 20_000, "p3": 20_000, "p4": 1000}}


def test_art16_nobody_squeezed() -> None:
    assert check_squeeze(None, STAKES, allowed=True) is None
    assert check_squeeze(None, STAKES, allowed=False) is None


def test_art16_1_squeezing_where_the_house_forbids_it() -> None:
    finding = check_squeeze("p2", STAKES, allowed=False)
    assert finding is not None
    assert (finding.code, finding.article) == (AlertCode.SQUEEZE_HOLDER, "Art. 16(1)")


@pytest.mark.parametrize("holder", ["p2", "p3"])
def test_art16_2_the_seated_patron_with_the_largest_bet_holds_the_cards(holder: str) -> None:
    assert check_squeeze(holder, STAKES, allowed=True) is None  # either of two equal largest


@pytest.mark.parametrize("holder", ["p1", "p4", "standing-patron"])
def test_art16_2_anyone_else_holding_the_cards_is_squeeze_holder(holder: str) -> None:
    finding = check_squeeze(holder, STAKES, allowed=True)
    assert finding is not None
    assert (finding.code, finding.article) == (AlertCode.SQUEEZE_HOLDER, "Art. 16(2)")
    assert finding.evidence["entitled"] == ["p2", "p3"]
    assert finding.evidence["largest_stake"] == {"round": 20_000}


def test_art16_2_nobody_seated_with_a_bet_means_nobody_may_squeeze() -> None:
    for stakes in ({"round": {}}, {"round": {"p1": 0}}):
        finding = check_squeeze("p1", stakes, allowed=True)
        assert finding is not None and finding.evidence["entitled"] == []
        assert "nobody" in finding.summary


def test_art16_2_the_largest_bet_on_either_side_where_the_house_reads_it_so() -> None:
    seated = [("p1", Spot.PLAYER, 5000), ("p2", Spot.BANKER, 3000), ("p3", Spot.BANKER, 1000), ("p3", Spot.TIE, 9000)]
    assert squeeze_stakes(seated, SqueezeHolder.LARGEST_TOTAL) == {"round": {"p1": 5000, "p2": 3000, "p3": 10_000}}
    by_side = squeeze_stakes(seated, SqueezeHolder.LARGEST_ON_SIDE)
    assert by_side == {"player": {"p1": 5000}, "banker": {"p2": 3000, "p3": 1000}}
    assert check_squeeze("p1", by_side, allowed=True) is None  # the Player's largest
    assert check_squeeze("p2", by_side, allowed=True) is None  # the Banker's largest
    finding = check_squeeze("p3", by_side, allowed=True)  # the largest total, but on neither side
    assert finding is not None and finding.evidence["entitled"] == ["p1", "p2"]
    assert finding.evidence["largest_stake"] == {"player": 5000, "banker": 3000} and "on the Player or the Banker" in finding.summary
    assert check_squeeze("p3", squeeze_stakes(seated, SqueezeHolder.LARGEST_TOTAL), allowed=True) is None


@pytest.mark.parametrize(
    ("rounding", "amount", "net", "commission"),
    [
        (Rounding.DOWN, 30, 29, 1),  # 5% of 30 is 1.5
        (Rounding.NEAREST, 30, 28, 2),
        (Rounding.UP, 30, 28, 2),
        (Rounding.DOWN, 510, 485, 25),  # 25.5
        (Rounding.NEAREST, 510, 484, 26),
        (Rounding.UP, 510, 484, 26),
        (Rounding.NEAREST, 1010, 959, 51),  # 50.5 rounds half up; 1,006 (50.3) to 50
        (Rounding.NEAREST, 1006, 956, 50),
        (Rounding.UP, 1006, 955, 51),
        (Rounding.UP, 1000, 950, 50),  # nothing to round
    ],
)
def test_art18_the_commission_is_rounded_as_the_house_profile_says(rounding: Rounding, amount: int, net: int, commission: int) -> None:
    assert settle(Spot.BANKER, amount, BANKER_WINS, FIVE, rounding) == Settlement(WIN, net, commission)


@pytest.mark.parametrize(("rounding", "net"), [(Rounding.DOWN, 12), (Rounding.NEAREST, 13), (Rounding.UP, 13)])
def test_art18_half_of_an_odd_no_commission_banker_6_is_rounded_as_the_house_profile_says(rounding: Rounding, net: int) -> None:
    banker_6 = RoundResult(4, 6, Outcome.BANKER, False, False)
    assert settle(Spot.BANKER, 25, banker_6, NO_COMMISSION, rounding) == Settlement(WIN, net, 0)
