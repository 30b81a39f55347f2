"""Every payout path through the settlement processor: each spot against each outcome (Art. 11,
17, 18), the pairs (Art. 13), ties carrying Player and Banker bets into the next round and
settling them there (Art. 12), the no-commission Banker 6 (Art. 18), voided rounds (Art. 10).
The expected figures are worked out by hand; the amounts are chosen so that a wrong rounding or
odds shows."""

from __future__ import annotations

import msgspec
import pytest
from settlement_desk import SHIFT, START, Desk

from surveil.core import profiles
from surveil.core.money import BetResult, Spot
from surveil.core.play import Outcome
from surveil.events import codec
from surveil.events import models as m
from surveil.settlement import processor
from surveil.settlement.ledger import PatronTotals, TableTotals

WIN, LOSE, PUSH, CARRIED = BetResult.WIN, BetResult.LOSE, BetResult.PUSH, BetResult.CARRIED
P, B, T = Outcome.PLAYER, Outcome.BANKER, Outcome.TIE

# 2,340 on each spot: (result, net, commission). 5% of 2,340 is 117 exactly.
EACH_SPOT_OF_2340 = {
    (Spot.PLAYER, P): (WIN, 2_340, 0),  # Art. 17: 1 to 1
    (Spot.PLAYER, B): (LOSE, -2_340, 0),
    (Spot.PLAYER, T): (CARRIED, 0, 0),  # Art. 12: stays for the next round
    (Spot.BANKER, P): (LOSE, -2_340, 0),
    (Spot.BANKER, B): (WIN, 2_223, 117),  # Art. 17-18: 1 to 1 less 5%
    (Spot.BANKER, T): (CARRIED, 0, 0),
    (Spot.TIE, P): (LOSE, -2_340, 0),
    (Spot.TIE, B): (LOSE, -2_340, 0),
    (Spot.TIE, T): (WIN, 18_720, 0),  # Art. 17: 8 to 1
    (Spot.PLAYER_PAIR, P): (LOSE, -2_340, 0),  # no pair dealt
    (Spot.PLAYER_PAIR, B): (LOSE, -2_340, 0),
    (Spot.PLAYER_PAIR, T): (LOSE, -2_340, 0),  # a side bet is decided on a tie too
    (Spot.BANKER_PAIR, P): (LOSE, -2_340, 0),
    (Spot.BANKER_PAIR, B): (LOSE, -2_340, 0),
    (Spot.BANKER_PAIR, T): (LOSE, -2_340, 0),
}

# The round with one 2,340 bet on each spot: staked, paid out, commission, house result.
ROUND_OF_FIVE_2340 = {
    P: (11_700, 4_680, 0, 7_020),
    B: (11_700, 4_563, 117, 7_137),
    T: (7_020, 21_060, 0, -14_040),  # Player and Banker carried: not staked yet
}


@pytest.mark.parametrize(("spot", "outcome"), EACH_SPOT_OF_2340)
def test_each_spot_against_each_outcome(desk: Desk, spot: Spot, outcome: Outcome) -> None:
    settled = desk.bets_settled(desk.open("R1"), desk.bet("R1", "B1", spot, 2_340), desk.close("R1"), desk.complete("R1", outcome))
    bet = settled["B1"]
    assert (bet.result, bet.net, bet.commission) == EACH_SPOT_OF_2340[spot, outcome]
    assert (bet.spot, bet.amount, bet.patron_id, bet.round_id) == (spot, 2_340, "P1", "R1")


@pytest.mark.parametrize("outcome", [P, B, T])
def test_a_round_of_one_bet_on_each_spot_adds_up(desk: Desk, outcome: Outcome) -> None:
    bets = [desk.bet("R1", f"B{n}", spot, 2_340, patron=f"P{n}") for n, spot in enumerate(Spot)]
    published = desk.send(desk.open("R1"), *bets, desk.close("R1"), desk.complete("R1", outcome))
    assert [type(e) for e in published] == [m.BetSettled] * 5 + [m.RoundSettled]
    round_settled = published[-1].data
    assert isinstance(round_settled, m.RoundSettledData)
    totals = (round_settled.staked, round_settled.paid_out, round_settled.commission, round_settled.house_net)
    assert totals == ROUND_OF_FIVE_2340[outcome]
    assert sum(e.data.net for e in published[:-1]) == -round_settled.house_net  # type: ignore[attr-defined]


@pytest.mark.parametrize(("amount", "net", "commission"), [(1_010, 960, 50), (2_000, 1_900, 100), (19, 19, 0), (3_333, 3_167, 166)])
def test_art18_the_commission_is_5_percent_rounded_down(desk: Desk, amount: int, net: int, commission: int) -> None:
    settled = desk.bets_settled(desk.open("R1"), desk.bet("R1", "B1", Spot.BANKER, amount), desk.complete("R1", B))
    assert (settled["B1"].net, settled["B1"].commission) == (net, commission)


@pytest.mark.parametrize("outcome", [P, B, T])
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
    desk: Desk, spot: Spot, player_pair: bool, banker_pair: bool, wins: bool, outcome: Outcome
) -> None:
    settled = desk.bets_settled(
        desk.open("R1"),
        desk.bet("R1", "B1", spot, 1_230),
        desk.complete("R1", outcome, player_pair=player_pair, banker_pair=banker_pair),
    )
    expected = (WIN, 13_530) if wins else (LOSE, -1_230)
    assert (settled["B1"].result, settled["B1"].net, settled["B1"].commission) == (*expected, 0)


# ---- Art. 12: ties ----------------------------------------------------------------------------


def test_art12_a_tie_carries_player_and_banker_bets_into_the_next_round_and_settles_them_there(desk: Desk) -> None:
    first = desk.send(
        desk.open("R1"),
        desk.bet("R1", "B1", Spot.PLAYER, 1_000, patron="P1"),
        desk.bet("R1", "B2", Spot.BANKER, 2_000, patron="P2"),
        desk.bet("R1", "B3", Spot.TIE, 500, patron="P3"),
        desk.bet("R1", "B4", Spot.BANKER_PAIR, 300, patron="P3"),
        desk.close("R1"),
        desk.complete("R1", T, banker_pair=True),
    )
    assert [(e.data.bet_id, e.data.result, e.data.net) for e in first[:-1]] == [  # type: ignore[attr-defined]
        ("B1", CARRIED, 0),
        ("B2", CARRIED, 0),
        ("B3", WIN, 4_000),
        ("B4", WIN, 3_300),
    ]
    assert first[-1].data == m.RoundSettledData(table_id="T07", round_id="R1", staked=800, paid_out=8_100, commission=0, house_net=-7_300)

    second = desk.send(
        desk.open("R2", carried=("B1", "B2")),
        desk.change("R2", "B2", Spot.BANKER, 3_000),  # Art. 12(3)(a): increased
        desk.bet("R2", "B5", Spot.PLAYER, 700, patron="P1"),
        desk.close("R2"),
        desk.complete("R2", B),
    )
    assert [(e.data.bet_id, e.data.amount, e.data.result, e.data.net, e.data.commission) for e in second[:-1]] == [  # type: ignore[attr-defined]
        ("B1", 1_000, LOSE, -1_000, 0),
        ("B2", 3_000, WIN, 2_850, 150),
        ("B5", 700, LOSE, -700, 0),
    ]
    assert second[-1].data == m.RoundSettledData(
        table_id="T07", round_id="R2", staked=4_700, paid_out=5_850, commission=150, house_net=-1_150
    )

    # A carried bet is staked once, in the round that decides it.
    assert desk.ledger.table("T07", SHIFT) == TableTotals(staked=5_500, paid_out=13_950, commission=150, house_net=-8_450, rounds=2, bets=5)
    assert desk.ledger.patron("P1", SHIFT) == PatronTotals(staked=1_700, paid_out=0, commission=0, net=-1_700, bets=2, wins=0, losses=2)
    assert desk.ledger.patron("P2", SHIFT) == PatronTotals(staked=3_000, paid_out=5_850, commission=150, net=2_850, bets=1, wins=1)
    assert desk.ledger.patron("P3", SHIFT) == PatronTotals(staked=800, paid_out=8_100, commission=0, net=7_300, bets=2, wins=2)
    assert [b.result for b in (desk.ledger.bet("T07", "R1", "B2"), desk.ledger.bet("T07", "R2", "B2"))] == [CARRIED, WIN]  # type: ignore[union-attr]


def test_art12_a_bet_carried_through_two_ties_is_settled_in_the_third_round(desk: Desk) -> None:
    desk.send(desk.open("R1"), desk.bet("R1", "B1", Spot.PLAYER, 1_500), desk.complete("R1", T))
    again = desk.bets_settled(desk.open("R2", carried=("B1",)), desk.complete("R2", T))
    assert (again["B1"].round_id, again["B1"].result) == ("R2", CARRIED)
    last = desk.bets_settled(desk.open("R3", carried=("B1",)), desk.complete("R3", P))
    assert (last["B1"].round_id, last["B1"].result, last["B1"].net) == ("R3", WIN, 1_500)
    assert desk.ledger.patron("P1", SHIFT) == PatronTotals(staked=1_500, paid_out=3_000, net=1_500, bets=1, wins=1)


def test_art12_3b_a_carried_bet_moved_to_banker_is_paid_as_a_banker_bet(desk: Desk) -> None:
    desk.send(desk.open("R1"), desk.bet("R1", "B1", Spot.PLAYER, 1_000), desk.complete("R1", T))
    settled = desk.bets_settled(desk.open("R2", carried=("B1",)), desk.change("R2", "B1", Spot.BANKER, 1_000), desk.complete("R2", B))
    assert (settled["B1"].spot, settled["B1"].net, settled["B1"].commission) == (Spot.BANKER, 950, 50)


def test_art12_1_a_carried_bet_withdrawn_or_not_named_is_not_settled_again(desk: Desk) -> None:
    desk.send(desk.open("R1"), desk.bet("R1", "B1", Spot.PLAYER, 1_000), desk.bet("R1", "B2", Spot.BANKER, 1_000), desk.complete("R1", T))
    # B1 carried and withdrawn in R2; B2 not named by R2's opening: both stakes went back.
    settled = desk.bets_settled(desk.open("R2", carried=("B1",)), desk.withdraw("R2", "B1"), desk.complete("R2", P))
    assert settled == {}
    assert desk.ledger.table("T07", SHIFT) == TableTotals(rounds=2)
    assert desk.ledger.round("T07", "R2").bet_ids == []  # type: ignore[union-attr]


def test_art12_carried_bets_stay_at_their_own_table(desk: Desk) -> None:
    other = Desk("T08")  # its events go through desk's settlement
    desk.send(desk.open("R1"), desk.bet("R1", "B1", Spot.PLAYER, 1_000), desk.complete("R1", T))
    settled = desk.bets_settled(other.open("R9", carried=("B1",)), other.complete("R9", P))
    assert settled == {}
    later = desk.bets_settled(desk.open("R2", carried=("B1",)), desk.complete("R2", P))
    assert later["B1"].net == 1_000


# ---- Art. 18: the no-commission variant ------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "banker_total", "net", "commission"),
    [
        ("no-commission", 6, 500, 0),  # a Banker 6 pays half, rounded down
        ("no-commission", 7, 1_001, 0),  # any other Banker win pays 1 to 1
        ("dicj", 6, 951, 50),  # with the 5% commission a Banker 6 is a Banker win like any other
        ("sjm", 6, 951, 50),
    ],
)
def test_art18_banker_wins_by_the_house_profiles_commission(profile: str, banker_total: int, net: int, commission: int) -> None:
    desk = Desk(profile=profile)
    settled = desk.bets_settled(
        desk.open("R1"),
        desk.bet("R1", "B1", Spot.BANKER, 1_001),
        desk.bet("R1", "B2", Spot.PLAYER, 1_001),
        desk.complete("R1", B, totals=(5, banker_total)),
    )
    assert (settled["B1"].result, settled["B1"].net, settled["B1"].commission) == (WIN, net, commission)
    assert (settled["B2"].result, settled["B2"].net) == (LOSE, -1_001)


def test_art18_the_commission_is_the_profile_of_the_round_not_of_the_next(desk: Desk) -> None:
    # The table switches to no-commission after R1 opened: R1 is still paid under dicj.
    settled = desk.bets_settled(
        desk.open("R1", profile="dicj"),
        desk.bet("R1", "B1", Spot.BANKER, 1_000),
        desk.open("R2", profile="no-commission"),
        desk.complete("R1", B, totals=(5, 6)),
    )
    assert (settled["B1"].net, settled["B1"].commission) == (950, 50)


# ---- Art. 10: voided rounds ------------------------------------------------------------------


def test_art10_a_voided_round_returns_every_stake_carried_bets_included(desk: Desk) -> None:
    desk.send(desk.open("R1"), desk.bet("R1", "B1", Spot.BANKER, 2_000, patron="P2"), desk.complete("R1", T))
    published = desk.send(
        desk.open("R2", carried=("B1",)),
        desk.bet("R2", "B2", Spot.PLAYER, 1_000),
        desk.bet("R2", "B3", Spot.TIE, 500),
        desk.void("R2"),
    )
    assert [(e.data.bet_id, e.data.result, e.data.net, e.data.commission) for e in published[:-1]] == [  # type: ignore[attr-defined]
        ("B1", PUSH, 0, 0),
        ("B2", PUSH, 0, 0),
        ("B3", PUSH, 0, 0),
    ]
    assert published[-1].data == m.RoundSettledData(table_id="T07", round_id="R2", staked=3_500, paid_out=3_500, commission=0, house_net=0)
    assert desk.ledger.round("T07", "R2").outcome == "void"  # type: ignore[union-attr]
    assert desk.ledger.patron("P2", SHIFT) == PatronTotals(staked=2_000, paid_out=2_000, bets=1, pushes=1)
    # The void ended B1: a later round naming it carries nothing.
    assert desk.bets_settled(desk.open("R3", carried=("B1",)), desk.complete("R3", B)) == {}


def test_a_round_without_bets_is_settled_with_zero_totals(desk: Desk) -> None:
    published = desk.send(desk.open("R1"), desk.close("R1"), desk.complete("R1", P))
    assert [e.data for e in published] == [
        m.RoundSettledData(table_id="T07", round_id="R1", staked=0, paid_out=0, commission=0, house_net=0)
    ]
    assert desk.ledger.table("T07", SHIFT) == TableTotals(rounds=1)


def test_changed_and_withdrawn_bets_are_settled_as_they_stand_at_the_end(desk: Desk) -> None:
    settled = desk.bets_settled(
        desk.open("R1"),
        desk.bet("R1", "B1", Spot.PLAYER, 1_000),
        desk.change("R1", "B1", Spot.TIE, 400),
        desk.bet("R1", "B2", Spot.BANKER, 1_000),
        desk.withdraw("R1", "B2"),
        desk.complete("R1", T),
    )
    assert list(settled) == ["B1"]
    assert (settled["B1"].spot, settled["B1"].amount, settled["B1"].net) == (Spot.TIE, 400, 3_200)


# ---- the contract ----------------------------------------------------------------------------


def test_published_events_keep_the_contract(desk: Desk) -> None:
    completed = desk.complete("R1", B)
    published = desk.send(desk.open("R1"), desk.bet("R1", "B1", Spot.BANKER, 1_000), desk.bet("R1", "B2", Spot.TIE, 100), completed)
    for event in published:
        assert codec.decode(codec.encode(event)) == event  # validates against the models, hence the schemas
        assert (event.subject, event.source, event.time) == ("T07", "settlement/T07", completed.time)
    assert [e.id for e in published] == ["T07:R1:B1:settled", "T07:R1:B2:settled", "T07:R1:settled"]
    assert completed.time > START


def test_the_same_events_settle_to_the_same_outputs_and_ledger() -> None:
    """Settlement is deterministic: what reconciliation and the exactly-once recovery rely on."""
    runs = []
    for _ in range(2):
        desk = Desk()
        published = desk.send(
            desk.open("R1"),
            desk.bet("R1", "B1", Spot.BANKER, 1_000),
            desk.bet("R1", "B2", Spot.PLAYER, 300),
            desk.complete("R1", T),
            desk.open("R2", carried=("B1", "B2")),
            desk.complete("R2", B),
        )
        runs.append(([codec.encode(e) for e in published], desk.snapshot()))
    assert runs[0] == runs[1]


@pytest.mark.parametrize(("rounding", "net", "commission"), [("down", 485, 25), ("nearest", 484, 26), ("up", 484, 26)])
def test_the_commission_is_rounded_as_the_rounds_house_profile_says(
    monkeypatch: pytest.MonkeyPatch, rounding: str, net: int, commission: int
) -> None:
    """Art. 18: 5% of a winning Banker 510 is 25.5; the profile in force decides the unit."""
    house = msgspec.structs.replace(profiles.load_profile("dicj"), commission_rounding=profiles.Rounding(rounding))
    monkeypatch.setattr(processor, "load_profile", lambda name: house)
    desk = Desk()
    settled = desk.bets_settled(desk.open("R1"), desk.bet("R1", "B1", Spot.BANKER, 510), desk.close("R1"), desk.complete("R1", B))
    assert (settled["B1"].net, settled["B1"].commission) == (net, commission)
