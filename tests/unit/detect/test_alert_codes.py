"""Every alert code of the contract (docs/contract.md): a minimal recorded log that raises exactly that alert, and a
legal twin that raises nothing. The logs go through the offline replay, as an analyst's would."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from rich.console import Console

from support.scenario import BANKER_NATURAL, BetSpec, Scenario, banker_natural_from, lines, table
from surveil.analysis.replay import replay
from surveil.analysis.report import render
from surveil.core.findings import AlertCode
from surveil.core.money import Rounding, RoundTotals, Settlement, Spot, SqueezeHolder
from surveil.core.play import Coup
from surveil.core.profiles import load_profile
from surveil.core.shoe import shuffled_shoe
from surveil.events import models as m

PLAYER_DRAWS = ["2H", "3C", "3D", "KS", "4H", "5C"]  # P 2+3=5 draws 4 -> 9; B 3 draws on a 4 -> 8
TIE = ["KH", "7C", "7D", "QS"]  # 7 and 7, both stand


def alerts(events: list[m.Event], profile: str | None = None) -> list[m.AlertRaised]:
    result = replay(iter(lines(events)), profile=profile)
    assert not result.bad_lines
    return result.alerts


def rules(events: list[m.Event]) -> set[str]:
    return {alert.data.rule for alert in alerts(events)}


def check(code: AlertCode, bent: list[m.Event], legal: list[m.Event]) -> None:
    assert rules(bent) == {code}
    assert alerts(legal) == []


# ---- rounds and cards (Art. 2-11) -------------------------------------------------------------


def test_draw_player_missing_art9_1() -> None:
    def bent(s: Scenario) -> None:  # the Player stands on 5; the Banker (3) then rightly draws
        s.place_hands(s.open_round(), ["2H", "3D"], ["3C", "KS", "4H"])

    check(AlertCode.DRAW_PLAYER_MISSING, table(bent), table(lambda s: s.round(PLAYER_DRAWS)))


def test_draw_player_extra_art9_2() -> None:
    def bent(s: Scenario) -> None:  # Player draws on 6; the Banker's 5 then rightly draws on a 4
        s.place_hands(s.open_round(), ["6H", "KD", "4D"], ["2C", "3S", "5C"])

    check(AlertCode.DRAW_PLAYER_EXTRA, table(bent), table(lambda s: s.round(["6H", "2C", "KD", "3S", "5C"])))


def test_draw_banker_missing_art9_3() -> None:
    def bent(s: Scenario) -> None:  # Banker 3 against a Player third card 4 must draw
        s.place_hands(s.open_round(), ["2H", "3D", "4H"], ["3C", "KS"])

    check(AlertCode.DRAW_BANKER_MISSING, table(bent), table(lambda s: s.round(PLAYER_DRAWS)))


def test_draw_banker_extra_art9_4() -> None:
    def bent(s: Scenario) -> None:  # Banker 3 against a Player third card 8 must stand
        s.place_hands(s.open_round(), ["2H", "3D", "8H"], ["3C", "KS", "5C"])

    check(AlertCode.DRAW_BANKER_EXTRA, table(bent), table(lambda s: s.round(["2H", "3C", "3D", "KS", "8H"])))


def test_deal_order_art7() -> None:
    def bent(s: Scenario) -> None:  # two cards to the Player, then two to the Banker
        s.place_hands(s.open_round(), ["8H", "KD"], ["2C", "3S"], order="PPBB")

    check(AlertCode.DEAL_ORDER, table(bent), table(lambda s: s.place_hands(s.open_round(), ["8H", "KD"], ["2C", "3S"])))


def test_result_mismatch_art11() -> None:
    def bent(s: Scenario) -> None:  # the Player's 9 beats the Banker's 8, but Banker is announced
        s.round(PLAYER_DRAWS, declare={"outcome": "banker"})

    check(AlertCode.RESULT_MISMATCH, table(bent), table(lambda s: s.round(PLAYER_DRAWS)))


def test_result_mismatch_on_a_pair_art13() -> None:
    bent = table(lambda s: s.round(PLAYER_DRAWS, declare={"player_pair": True}))
    [alert] = alerts(bent)
    assert (alert.data.rule, alert.data.article) == ("RESULT_MISMATCH", "Art. 13")


def test_card_mismatch_a_switched_card() -> None:
    def switch(player: list[m.HandCard], banker: list[m.HandCard]) -> None:
        player[0] = m.HandCard(index=player[0].index, card="2S")  # same value: only the switch shows

    check(AlertCode.CARD_MISMATCH, table(lambda s: s.round(PLAYER_DRAWS, bend=switch)), table(lambda s: s.round(PLAYER_DRAWS)))


@pytest.mark.parametrize("wrong", [400, 900])  # within the 416 cards of the shoe (never read), and past its end
def test_card_mismatch_one_wrong_index_is_one_alert_art7(wrong: int) -> None:
    """A hand card at a shoe index the shoe never read is one CARD_MISMATCH, naming the card it
    stands for; that card, the round's order and the later rounds' cards are not reported."""

    def rounds(bend: Callable[[list[m.HandCard], list[m.HandCard]], None] | None) -> Callable[[Scenario], None]:
        def build(s: Scenario) -> None:
            s.round(PLAYER_DRAWS, bend=bend)
            s.round(BANKER_NATURAL, [BetSpec("P2", Spot.PLAYER, 1000)])
            s.round(TIE)

        return build

    def wrong_index(player: list[m.HandCard], banker: list[m.HandCard]) -> None:
        player[1] = m.HandCard(index=wrong, card=player[1].card)

    bent = table(rounds(wrong_index))
    check(AlertCode.CARD_MISMATCH, bent, table(rounds(None)))
    [alert] = alerts(bent)
    assert alert.data.evidence["index"] == wrong and alert.data.evidence["shoe_read"] is None
    assert alert.data.evidence["stands_for"] == {"index": 15, "card": "3D"}  # the Player's second card
    assert "a wrong shoe index" in alert.data.summary


# After table(): cards 1-8 burned at the shoe's start (the 5S, 9D, JC, 4S, QD, 7S, AC, 6D), then a
# round dealt from cards 9-12 (the 2H, 8C, 3D, KS); the round under test starts at card 13.


@pytest.mark.parametrize(
    ("player", "banker", "brought", "first"),
    [
        (["6D", "KH"], ["9C", "QS"], {0: 8}, {"where": "burned", "round_id": None}),  # the last card burned at the shoe's start
        (["3D", "5H"], ["9C", "QS"], {0: 11}, {"where": "an earlier round", "round_id": "T01-S1-R1"}),  # the last round's
        (["9H", "KD"], ["8C", "KD"], {3: 15}, {"where": "player hand", "round_id": "T01-S1-R2"}),  # the Player's own
    ],
)
def test_card_reused_a_card_brought_back_into_play_art2_8(
    player: list[str], banker: list[str], brought: dict[int, int], first: dict[str, str | None]
) -> None:
    bent = table(lambda s: s.place_hands(s.open_round(), player, banker, brought=brought))
    check(AlertCode.CARD_REUSED, bent, table(lambda s: s.place_hands(s.open_round(), player, banker)))
    [alert] = alerts(bent)
    assert (alert.data.article, alert.data.severity, alert.data.evidence["first"]) == ("Art. 2, 8", "critical", first)
    assert alert.data.evidence["index"] == next(iter(brought.values()))


def test_burn_mid_round_changes_the_cards_each_hand_receives_art8() -> None:
    def mid(s: Scenario) -> None:  # a card burned after the Player's first card
        s.place_hands(s.open_round(), ["2H", "3D", "4H"], ["3C", "KS", "5C"], burn_after=(1, ["7C"]))

    def start(s: Scenario) -> None:  # Art. 8: a burn at the round's start, before its first card
        round_id = s.open_round()
        s.burn(["7C"], round_id)
        s.place_hands(round_id, ["2H", "3D", "4H"], ["3C", "KS", "5C"])

    check(AlertCode.BURN_MID_ROUND, table(mid), table(start))
    [alert] = alerts(table(mid))
    assert (alert.data.article, alert.data.evidence["burned"], alert.data.evidence["first_card"]) == ("Art. 8", [14], 13)


def test_card_unaccounted_neither_burned_nor_dealt() -> None:
    def bent(s: Scenario) -> None:
        s.round(BANKER_NATURAL, extra_reads=["7C"])

    def legal(s: Scenario) -> None:
        round_id, _ = s.round(BANKER_NATURAL)
        s.burn(["7C"], round_id)  # Art. 8: burning at a round's start is the house's right

    check(AlertCode.CARD_UNACCOUNTED, table(bent), table(legal))


def test_card_overcount_a_foreign_card_art1() -> None:
    def shoe(burn: list[str]) -> list[m.Event]:
        s = Scenario()
        s.start_shoe(burn=burn)  # dicj burns one card per deck: eight
        s.round(["AS", "8C", "3D", "KS"])  # the ninth ace of spades of an eight-deck shoe
        s.end_shoe()
        return s.log()

    check(AlertCode.CARD_OVERCOUNT, shoe(["AS"] * 8), shoe(["AS"] * 7 + ["5D"]))


def test_card_exposed_is_recorded_and_play_stays_valid_art4() -> None:
    bent = table(lambda s: s.round(PLAYER_DRAWS, face_up=["4H"]))
    assert rules(bent) == {AlertCode.CARD_EXPOSED}
    assert alerts(bent)[0].data.severity == "info"
    assert alerts(table(lambda s: s.round(PLAYER_DRAWS))) == []


def voided(player: list[str], banker: list[str], reason: str, **options: object) -> list[m.Event]:
    """A round with two bets voided after ``player`` and ``banker`` were dealt."""

    def build(s: Scenario) -> None:
        round_id = s.open_round()
        s.place(round_id, BetSpec("P1", Spot.BANKER, 1000))
        s.place(round_id, BetSpec("P2", Spot.PLAYER, 2000, seat="2"))
        s.close(round_id)
        s.void(round_id, player, banker, reason, **options)  # type: ignore[arg-type]

    return table(build)


def completed(cards: list[str], **options: object) -> list[m.Event]:
    """The voided round's legal twin: the same bets, the round played to its end."""
    return table(lambda s: s.round(cards, [BetSpec("P1", Spot.BANKER, 1000), BetSpec("P2", Spot.PLAYER, 2000, seat="2")], **options))


def test_round_voided_with_no_misdeal_is_critical_art10() -> None:
    bent = voided(["2H", "3D"], ["3C", "KS"], "dealer's call")
    check(AlertCode.ROUND_VOIDED, bent, completed(PLAYER_DRAWS))
    [alert] = alerts(bent)
    assert (alert.data.severity, alert.data.article) == ("critical", "Art. 10")
    evidence = alert.data.evidence
    assert (evidence["reason"], evidence["misdeals"], evidence["exposed"], evidence["stake"]) == ("dealer's call", [], [], 3000)
    assert "no misdeal" in alert.data.summary


def test_round_voided_for_an_exposed_card_is_critical_art4() -> None:
    """The trap of the corrupted text: an exposed card leaves the round and its bets valid."""
    bent = voided(["2H", "3D"], ["3C", "KS"], "card exposed", face_up=["3D"])
    assert sorted(a.data.rule for a in alerts(bent)) == ["CARD_EXPOSED", "ROUND_VOIDED"]
    voided_alert = next(a for a in alerts(bent) if a.data.rule == "ROUND_VOIDED")
    assert (voided_alert.data.severity, voided_alert.data.article) == ("critical", "Art. 4, 10")
    assert voided_alert.data.evidence["exposed"] == [{"index": 15, "card": "3D"}]
    # its twin: the exposed card stays in play, and the round is played to its end
    assert [a.data.rule for a in alerts(completed(PLAYER_DRAWS, face_up=["3D"]))] == ["CARD_EXPOSED"]


def test_round_voided_after_a_misdeal_is_a_warning_art10() -> None:
    bent = voided(["8H", "KD"], ["2C", "3S"], "cards dealt out of order", order="PPBB")
    check(AlertCode.ROUND_VOIDED, bent, completed(["8H", "2C", "KD", "3S"]))
    [alert] = alerts(bent)
    assert (alert.data.severity, alert.data.article) == ("warning", "Art. 10")
    assert [d["code"] for d in alert.data.evidence["misdeals"]] == ["DEAL_ORDER"]
    extra = voided(["6H", "KD", "4D"], ["2C", "3S"], "Player drew on 6")  # Art. 9(2): the Player stands on 6
    [alert] = alerts(extra)
    assert alert.data.severity == "warning" and [d["code"] for d in alert.data.evidence["misdeals"]] == ["DRAW_PLAYER_EXTRA"]


def test_round_voided_stakes_returned_are_still_checked_art10() -> None:
    events = voided(["2H", "3D"], ["3C", "KS"], "dealer's call")
    position = next(i for i, e in enumerate(events) if isinstance(e, m.BetSettled) and e.data.patron_id == "P2")
    paid = events[position]
    assert (paid.data.result, paid.data.net) == ("push", 0)
    events[position] = msgspec.structs.replace(paid, data=msgspec.structs.replace(paid.data, result="lose", net=-2000))
    events = _retotal(events, paid.data.round_id)
    assert sorted(a.data.rule for a in alerts(events)) == ["PAYOUT_MISMATCH", "ROUND_VOIDED"]


def test_round_voided_in_an_older_log_takes_the_cards_burned_for_it() -> None:
    """A round.voided without the hands (recorded before v1.2) is judged on the cards burned for it."""
    events = [
        msgspec.structs.replace(e, data=msgspec.structs.replace(e.data, player=None, banker=None)) if isinstance(e, m.RoundVoided) else e
        for e in voided(["2H", "3D"], ["3C", "KS"], "card exposed", face_up=["3D"])
    ]
    [alert] = [a for a in alerts(events) if a.data.rule == "ROUND_VOIDED"]
    assert alert.data.evidence["cards"] == {"burned_for_the_round": [13, 14, 15, 16]}
    assert alert.data.evidence["exposed"] == [{"index": 15, "card": "3D"}] and alert.data.severity == "critical"


def test_burn_count_art2_1() -> None:
    def shoe(burned: int) -> list[m.Event]:
        s = Scenario()
        s.start_shoe(burn=["5S"] * burned)
        s.round(BANKER_NATURAL)
        s.end_shoe()
        return s.log()

    check(AlertCode.BURN_COUNT, shoe(7), shoe(8))


def test_burn_count_first_card_policy_of_sjm() -> None:
    def shoe(burn: list[str]) -> list[m.Event]:
        s = Scenario(profile="sjm", min_bet=1000, max_bet=300_000)
        s.start_shoe(burn=burn)
        s.round(BANKER_NATURAL)
        s.end_shoe()
        return s.log()

    # A queen shown first counts 10 for the burn: it and ten more cards go.
    filler = ["9D", "JC", "4S", "QD", "7S", "AC", "6D", "KC", "3H", "8D"]
    check(AlertCode.BURN_COUNT, shoe(["QH", *filler[:9]]), shoe(["QH", *filler]))


def test_an_automatic_machine_has_no_cut_or_burn_art2_3() -> None:
    s = Scenario(automatic=True)
    s.start_shoe()
    s.round(BANKER_NATURAL)
    s.end_shoe()
    assert alerts(s.log()) == []


def test_cut_card_depth_art2_1() -> None:
    def shoe(cut_behind: int) -> list[m.Event]:
        s = Scenario()
        s.play_shoe(random.Random(7), cut_behind=cut_behind)
        return s.log()

    check(AlertCode.CUT_CARD_DEPTH, shoe(10), shoe(14))


def test_cut_card_missing_a_shoe_dealt_past_its_place_art2_1_3() -> None:
    def shoe(cut_behind: int, cut_card: bool, automatic: bool = False) -> list[m.Event]:
        s = Scenario(automatic=automatic)
        s.play_shoe(random.Random(7), cut_behind=cut_behind, cut_card=cut_card)
        return s.log()

    bent = shoe(14, cut_card=False)  # dealt to about 10 cards from the end, no cut card
    check(AlertCode.CUT_CARD_MISSING, bent, shoe(14, cut_card=True))
    [alert] = alerts(bent)
    assert (alert.data.article, alert.data.severity, alert.data.evidence["last_cut_card_place"]) == ("Art. 2.1, 3", "warning", 404)
    assert alert.data.evidence["cards_out"] > 404
    assert alerts(shoe(60, cut_card=False)) == []  # Art. 3.2: the house changed the shoe before the cut card's place
    assert alerts(shoe(14, cut_card=False, automatic=True)) == []  # Art. 2.3: a machine has no cut card


def test_rounds_after_cut_card_art3_1() -> None:
    def shoe(rounds_after_cut: int, profile: str = "dicj") -> list[m.Event]:
        s = Scenario(profile=profile, min_bet=1000)
        s.start_shoe()
        s.round(BANKER_NATURAL)
        s.cut_card()  # between rounds: the next round is the last
        for _ in range(rounds_after_cut):
            s.round(["9H", "2C", "KD", "5S"])
        s.end_shoe()
        return s.log()

    check(AlertCode.ROUNDS_AFTER_CUT_CARD, shoe(2), shoe(1))
    # SJM plays one more round after the last one
    check(AlertCode.ROUNDS_AFTER_CUT_CARD, shoe(3, "sjm"), shoe(2, "sjm"))


def test_demo_rounds_at_most_three_art2_2() -> None:
    def shoe(demos: int) -> list[m.Event]:
        s = Scenario()
        s.start_shoe()
        for _ in range(demos):
            round_id = s.open_round(demo=True)
            s.close(round_id)
            s.deal(round_id, BANKER_NATURAL)
        s.round(PLAYER_DRAWS, [BetSpec("P1", Spot.BANKER, 1000)])
        s.end_shoe()
        return s.log()

    check(AlertCode.DEMO_ROUNDS, shoe(4), shoe(3))


def test_demo_rounds_only_before_the_first_real_round_art2_2() -> None:
    def shoe(demo_after_play: bool) -> list[m.Event]:
        s = Scenario()
        s.start_shoe()
        if not demo_after_play:
            demo = s.open_round(demo=True)
            s.close(demo)
            s.deal(demo, BANKER_NATURAL)
        s.round(PLAYER_DRAWS, [BetSpec("P1", Spot.BANKER, 1000)])
        if demo_after_play:
            demo = s.open_round(demo=True)
            s.close(demo)
            s.deal(demo, BANKER_NATURAL)
        s.round(TIE)
        s.end_shoe()
        return s.log()

    check(AlertCode.DEMO_ROUNDS, shoe(True), shoe(False))
    [alert] = alerts(shoe(True))
    assert alert.data.evidence["real_rounds_before"] == 1 and alert.data.round_id == "T01-S1-R2"


def test_demo_rounds_take_no_bets_art2_2() -> None:
    def shoe(bet: bool) -> list[m.Event]:
        s = Scenario()
        s.start_shoe()
        round_id = s.open_round(demo=True)
        if bet:
            s.place(round_id, BetSpec("P1", Spot.PLAYER, 500))
        s.close(round_id)
        s.deal(round_id, BANKER_NATURAL)
        s.end_shoe()
        return s.log()

    check(AlertCode.DEMO_ROUNDS, shoe(True), shoe(False))


# ---- bets (Art. 12-16 and house rules) ----------------------------------------------------


def after_tie(profile: str, move: Callable[[Scenario, str, str], None], carry: bool = True) -> list[m.Event]:
    """A Player bet left on a tie, then ``move`` applied to it in the next round (which names it
    among its carried bets unless not ``carry``)."""
    s = Scenario(profile=profile, min_bet=1000, max_bet=300_000)
    s.start_shoe()
    tie_round, [bet_id] = s.round(TIE, [BetSpec("P1", Spot.PLAYER, 5000)])
    round_id = s.open_round(carried=[bet_id] if carry else [])
    move(s, round_id, bet_id)
    s.close(round_id)
    s.deal(round_id, PLAYER_DRAWS)
    s.end_shoe()
    return s.log()


def test_tie_bet_withdrawn_under_sjm_art12_1() -> None:
    bent = after_tie("sjm", lambda s, r, b: s.withdraw(r, b))
    check(AlertCode.TIE_BET_WITHDRAWN, bent, after_tie("sjm", lambda s, r, b: None))
    assert alerts(after_tie("dicj", lambda s, r, b: s.withdraw(r, b))) == []  # the DICJ default allows it


def test_tie_bet_withdrawn_when_the_next_round_leaves_a_carried_bet_out_art12_1() -> None:
    """A carried bet the next round.opened does not name was withdrawn: under sjm the same alert,
    with the same id, as an explicit bet.withdrawn; under dicj nothing."""
    dropped = after_tie("sjm", lambda s, r, b: None, carry=False)
    check(AlertCode.TIE_BET_WITHDRAWN, dropped, after_tie("sjm", lambda s, r, b: None))
    [alert] = alerts(dropped)
    [explicit] = alerts(after_tie("sjm", lambda s, r, b: s.withdraw(r, b)))
    assert alert.data.alert_id == explicit.data.alert_id
    assert (alert.data.bet_id, alert.data.patron_id, alert.data.evidence["after"]) == (explicit.data.bet_id, "P1", None)
    assert alerts(after_tie("dicj", lambda s, r, b: None, carry=False)) == []


def test_tie_bet_reduced_under_sjm_art12_3a() -> None:
    bent = after_tie("sjm", lambda s, r, b: s.change(r, b, Spot.PLAYER, 2000))
    check(AlertCode.TIE_BET_REDUCED, bent, after_tie("sjm", lambda s, r, b: s.change(r, b, Spot.PLAYER, 8000)))


def test_tie_bet_moved_under_sjm_art12_3b() -> None:
    bent = after_tie("sjm", lambda s, r, b: s.change(r, b, Spot.BANKER, 5000))
    check(AlertCode.TIE_BET_MOVED, bent, after_tie("dicj", lambda s, r, b: s.change(r, b, Spot.BANKER, 5000)))


def test_late_bet_after_bets_closed() -> None:
    def round_with(late: bool) -> Callable[[Scenario], None]:
        def build(s: Scenario) -> None:
            round_id = s.open_round()
            if not late:
                s.place(round_id, BetSpec("P7", Spot.PLAYER, 2000))
            s.close(round_id)
            if late:
                s.place(round_id, BetSpec("P7", Spot.PLAYER, 2000))
            s.deal(round_id, PLAYER_DRAWS)

        return build

    check(AlertCode.LATE_BET, table(round_with(True)), table(round_with(False)))


def test_a_late_bet_is_also_held_to_the_table_limit_art14() -> None:
    """A bet placed or changed after bets close is LATE_BET, and TABLE_LIMIT when it leaves the
    Banker/Player difference or a side spot above the limit."""

    def round_with(late: bool, change: bool = False) -> Callable[[Scenario], None]:
        def build(s: Scenario) -> None:
            round_id = s.open_round()
            s.place(round_id, BetSpec("P1", Spot.BANKER, 150_000))
            if not late:
                s.place(round_id, BetSpec("P2", Spot.PLAYER, 100_000, seat="2"))
                s.place(round_id, BetSpec("P7", Spot.BANKER, 100_000, seat="7", bet_id="BIG"))
            s.close(round_id)
            if late and change:
                s.change(round_id, s.place(round_id, BetSpec("P7", Spot.TIE, 500, seat="7")), Spot.TIE, 210_000)
            elif late:
                s.place(round_id, BetSpec("P7", Spot.BANKER, 100_000, seat="7"))
            s.deal(round_id, PLAYER_DRAWS)

        return build

    bent = alerts(table(round_with(True)))
    assert sorted(a.data.rule for a in bent) == ["LATE_BET", "TABLE_LIMIT"]
    limit = next(a for a in bent if a.data.rule == "TABLE_LIMIT")
    assert (limit.data.article, limit.data.evidence["difference"], limit.data.evidence["late"]) == ("Art. 14", 250_000, True)
    changed = alerts(table(round_with(True, change=True)))
    assert sorted(a.data.rule for a in changed) == ["LATE_BET", "LATE_BET", "TABLE_LIMIT"]  # placed late, then changed late
    assert next(a for a in changed if a.data.rule == "TABLE_LIMIT").data.evidence["spot"] == "tie"
    assert alerts(table(round_with(False))) == []


def test_banker_bet_multiple_of_the_minimum() -> None:
    check(
        AlertCode.BANKER_BET_MULTIPLE,
        table(lambda s: s.round(PLAYER_DRAWS, [BetSpec("P1", Spot.BANKER, 1200)])),
        table(lambda s: s.round(PLAYER_DRAWS, [BetSpec("P1", Spot.BANKER, 1500)])),
    )


def test_bet_below_minimum() -> None:
    check(
        AlertCode.BET_BELOW_MINIMUM,
        table(lambda s: s.round(PLAYER_DRAWS, [BetSpec("P1", Spot.PLAYER, 300)])),
        table(lambda s: s.round(PLAYER_DRAWS, [BetSpec("P1", Spot.PLAYER, 700)])),
    )


def test_table_limit_on_the_banker_player_difference_art14() -> None:
    big = BetSpec("P1", Spot.BANKER, 250_000)
    check(
        AlertCode.TABLE_LIMIT,
        table(lambda s: s.round(PLAYER_DRAWS, [big])),
        table(lambda s: s.round(PLAYER_DRAWS, [big, BetSpec("P2", Spot.PLAYER, 100_000, seat="2")])),
    )


def test_table_limit_on_the_tie_spot_art14() -> None:
    check(
        AlertCode.TABLE_LIMIT,
        table(lambda s: s.round(PLAYER_DRAWS, [BetSpec("P1", Spot.TIE, 150_000), BetSpec("P2", Spot.TIE, 60_000, seat="2")])),
        table(lambda s: s.round(PLAYER_DRAWS, [BetSpec("P1", Spot.TIE, 150_000), BetSpec("P2", Spot.TIE, 50_000, seat="2")])),
    )


def test_standing_bet_on_seat_box_art15() -> None:
    def log(box: str) -> list[m.Event]:
        bets = [BetSpec("P1", Spot.PLAYER, 1000, seat="1"), BetSpec("P8", Spot.BANKER, 2000, seat="standing", box=box)]
        return table(lambda s: s.round(PLAYER_DRAWS, bets))

    check(AlertCode.STANDING_BET_ON_SEAT_BOX, log("3"), log("standing"))
    [alert] = alerts(log("3"))
    assert (alert.data.article, alert.data.severity, alert.data.patron_id) == ("Art. 15", "warning", "P8")
    assert (alert.data.evidence["box"], alert.data.evidence["amount"]) == ("3", 2000)


def test_a_table_of_more_than_seven_seats_art1() -> None:
    def log(seats: int | None) -> list[m.Event]:
        bets = [BetSpec("P9", Spot.PLAYER, 1000, seat="9"), BetSpec("P12", Spot.BANKER, 2000, seat="12")]
        return table(lambda s: s.round(PLAYER_DRAWS, bets, squeezed_by="P12"), seats=seats)

    assert alerts(log(12)) == []
    assert [e.data.seats for e in log(12) if isinstance(e, m.RoundOpened)] == [12, 12, 12]


def test_an_older_log_without_the_layout_box_replays_and_the_report_says_art15_was_not_checked() -> None:
    bets = [BetSpec("P1", Spot.PLAYER, 1000), BetSpec("P8", Spot.BANKER, 2000, seat="standing", box="3")]
    now = table(lambda s: s.round(PLAYER_DRAWS, bets))
    assert rules(now) == {AlertCode.STANDING_BET_ON_SEAT_BOX}
    older = [
        msgspec.structs.replace(e, data=msgspec.structs.replace(e.data, box=None))
        if isinstance(e, m.BetPlaced)
        else msgspec.structs.replace(e, data=msgspec.structs.replace(e.data, seats=None))
        if isinstance(e, m.RoundOpened)
        else e
        for e in now
    ]
    encoded = lines(older)
    assert not any(b'"box"' in line or b'"seats"' in line for line in encoded)  # as recorded before v1.2
    result = replay(iter(encoded))
    assert (result.alerts, result.unboxed_bets) == ([], 4)  # the bets of the other two rounds too
    console = Console(record=True, width=200)
    console.print(render(result, 1.0))
    assert "Art. 15 (standing bettors on the seated bettors' boxes) not checked for 4 bets" in console.export_text()
    assert replay(iter(lines(table(lambda s: s.round(PLAYER_DRAWS, [BetSpec("P1", Spot.PLAYER, 1000)]))))).unboxed_bets == 0


def test_squeeze_holder_is_the_largest_seated_bettor_art16() -> None:
    bets = [BetSpec("P1", Spot.PLAYER, 1000), BetSpec("P2", Spot.PLAYER, 5000, seat="2"), BetSpec("P3", Spot.PLAYER, 9000, seat="standing")]
    check(
        AlertCode.SQUEEZE_HOLDER,
        table(lambda s: s.round(PLAYER_DRAWS, bets, squeezed_by="P1")),
        table(lambda s: s.round(PLAYER_DRAWS, bets, squeezed_by="P2")),
    )


def test_squeeze_where_the_house_does_not_allow_it_art16_1() -> None:
    bets = [BetSpec("P1", Spot.PLAYER, 900)]

    def build(squeezed_by: str | None) -> list[m.Event]:
        return table(lambda s: s.round(PLAYER_DRAWS, bets, squeezed_by=squeezed_by), profile="no-commission", min_bet=500, max_bet=100_000)

    check(AlertCode.SQUEEZE_HOLDER, build("P1"), build(None))


def test_the_squeeze_holder_and_the_commission_rounding_are_the_profiles_choice_art16_18(monkeypatch: pytest.MonkeyPatch) -> None:
    """House choices are profile data: the detectors and settlement read them from the profile."""
    from surveil.detect import watch
    from surveil.settlement import processor

    bets = [BetSpec("P1", Spot.PLAYER, 6000), BetSpec("P2", Spot.BANKER, 4000, seat="2"), BetSpec("P2", Spot.TIE, 3000, seat="2")]
    log = table(lambda s: s.round(BANKER_NATURAL, bets, squeezed_by="P1"))  # P1: the largest Player bet; P2: the largest total
    assert rules(log) == {AlertCode.SQUEEZE_HOLDER}  # dicj: the largest seated total holds the cards
    on_side = msgspec.structs.replace(load_profile("dicj"), squeeze_holder=SqueezeHolder.LARGEST_ON_SIDE)
    monkeypatch.setattr(watch, "load_profile", lambda name: on_side)
    assert alerts(log) == []

    odd = [BetSpec("P1", Spot.BANKER, 1010)]  # 5% is 50.5
    rounded_up = msgspec.structs.replace(load_profile("dicj"), commission_rounding=Rounding.UP)
    monkeypatch.setattr(watch, "load_profile", lambda name: rounded_up)
    paid_down = table(lambda s: s.round(BANKER_NATURAL, odd), min_bet=10)
    [alert] = alerts(paid_down)  # settlement still rounds down, as dicj does
    assert (alert.data.rule, alert.data.evidence["differences"]["commission"]) == ("PAYOUT_MISMATCH", {"paid": 50, "due": 51})
    monkeypatch.setattr(processor, "load_profile", lambda name: rounded_up)
    assert alerts(table(lambda s: s.round(BANKER_NATURAL, odd), min_bet=10)) == []


# ---- money (Art. 17-18) -----------------------------------------------------------------------


def money_log() -> list[m.Event]:
    return table(lambda s: s.round(PLAYER_DRAWS, [BetSpec("P1", Spot.BANKER, 1000), BetSpec("P2", Spot.PLAYER, 2000, seat="2")]))


def settled_positions(events: list[m.Event]) -> list[int]:
    return [i for i, e in enumerate(events) if isinstance(e, m.BetSettled)]


def test_payout_mismatch_art17() -> None:
    events = money_log()
    position = [i for i in settled_positions(events) if events[i].data.patron_id == "P2"][0]
    paid = events[position]
    assert paid.data.net == 2000  # Player wins 1:1
    events[position] = msgspec.structs.replace(paid, data=msgspec.structs.replace(paid.data, net=2200))
    events = _retotal(events, paid.data.round_id)
    check(AlertCode.PAYOUT_MISMATCH, events, money_log())


def test_payout_mismatch_on_the_commission_art18() -> None:
    events = table(lambda s: s.round(BANKER_NATURAL, [BetSpec("P1", Spot.BANKER, 1000)]))
    position = [i for i in settled_positions(events) if events[i].data.spot == "banker"][0]
    paid = events[position]
    assert (paid.data.net, paid.data.commission) == (950, 50)
    events[position] = msgspec.structs.replace(paid, data=msgspec.structs.replace(paid.data, net=900, commission=100))
    events = _retotal(events, paid.data.round_id)
    [alert] = alerts(events)
    assert (alert.data.rule, alert.data.article) == ("PAYOUT_MISMATCH", "Art. 18")


def test_unsettled_bet() -> None:
    events = money_log()
    position = [i for i in settled_positions(events) if events[i].data.patron_id == "P2"][0]
    round_id = events[position].data.round_id
    del events[position]
    events = _retotal(events, round_id)
    check(AlertCode.UNSETTLED_BET, events, money_log())


def test_duplicate_settlement() -> None:
    events = money_log()
    position = [i for i in settled_positions(events) if events[i].data.patron_id == "P2"][0]
    again = msgspec.structs.replace(events[position], id="settlement-paid-again")
    events.insert(position + 1, again)
    events = _retotal(events, again.data.round_id)  # the round's totals count the second payment too
    check(AlertCode.DUPLICATE_SETTLEMENT, events, money_log())


def test_the_same_settlement_delivered_twice_is_not_a_duplicate() -> None:
    events = money_log()
    position = settled_positions(events)[0]
    events.insert(position + 1, events[position])
    assert alerts(events) == []


def _retotal(events: list[m.Event], round_id: str) -> list[m.Event]:
    """Make the round's totals agree with its (tampered) bet settlements, so that only the
    tampering itself shows."""
    totals = RoundTotals()
    for e in events:
        if isinstance(e, m.BetSettled) and e.data.round_id == round_id:
            totals = totals.add(e.data.amount, Settlement(e.data.result, e.data.net, e.data.commission))
    return [
        msgspec.structs.replace(
            e,
            data=msgspec.structs.replace(
                e.data, staked=totals.staked, paid_out=totals.paid_out, commission=totals.commission, house_net=totals.house_net
            ),
        )
        if isinstance(e, m.RoundSettled) and e.data.round_id == round_id
        else e
        for e in events
    ]


# ---- patterns ---------------------------------------------------------------------------------


def test_patron_win_rate_a_patron_who_knows_the_outcome() -> None:
    def log(cheat: bool) -> list[m.Event]:
        def bets(coup: Coup) -> list[BetSpec]:
            outcome = coup.result.outcome.value
            spot = Spot(outcome) if cheat and outcome != "tie" else Spot.BANKER
            return [BetSpec("CHEAT", spot, 1000)]

        s = Scenario()
        s.play_shoe(random.Random(11), bets)
        return s.log()

    bent = alerts(log(True))
    assert {a.data.rule for a in bent} == {"PATRON_WIN_RATE"}
    assert bent[0].data.patron_id == "CHEAT"
    assert alerts(log(False)) == []


def test_outcome_drift_a_shoe_stacked_for_the_banker() -> None:
    rng = random.Random(5)
    s = Scenario()
    s.start_shoe()
    pack = [c.code for c in shuffled_shoe(8, rng)]
    for _ in range(40):
        s.round(banker_natural_from(pack))
    s.end_shoe()
    check(AlertCode.OUTCOME_DRIFT, s.log(), _legal_shoe(5))


def _legal_shoe(seed: int) -> list[m.Event]:
    s = Scenario()
    s.play_shoe(random.Random(seed))
    return s.log()


def test_dealer_error_rate_a_dealer_who_errs_often() -> None:
    def log(errors: int) -> list[m.Event]:
        s = Scenario(dealer="D9")
        s.start_shoe()
        for n in range(10):
            suit = "SHDC"[n % 4]
            round_id = s.open_round()
            s.close(round_id)
            s.place_hands(round_id, [f"8{suit}", f"K{suit}"], [f"2{suit}", f"3{suit}"], order="PPBB" if n < errors else None)
        s.end_shoe()
        return s.log()

    assert rules(log(6)) == {"DEAL_ORDER", "DEALER_ERROR_RATE"}
    assert rules(log(1)) == {"DEAL_ORDER"}  # one slip is not a pattern
    assert alerts(log(0)) == []


def test_shoe_repeat_a_run_of_an_earlier_shoe() -> None:
    def log(repeat: bool) -> list[m.Event]:
        rng = random.Random(3)
        s = Scenario()
        first = s.play_shoe(rng)
        second = [c.code for c in shuffled_shoe(8, rng)]
        if repeat:  # cards 100-129 of the first shoe come out again as cards 200-229
            run = first[100:130]
            rest = list(second)
            for card in run:
                rest.remove(card)
            second = rest[:200] + run + rest[200:]
        s.play_shoe(rng, pack=second)
        return s.log()

    check(AlertCode.SHOE_REPEAT, log(True), log(False))


def test_every_alert_code_has_a_test_here() -> None:
    # DEVICE_SIGNATURE comes from the dead letters of live devices, not from a recorded log:
    # tests/unit/events/test_shoe_signatures.py and the integration tests have it.
    here = Path(__file__)
    source = here.read_text(encoding="utf-8") + (here.parents[1] / "events" / "test_shoe_signatures.py").read_text(encoding="utf-8")
    missing = [code for code in AlertCode if f"AlertCode.{code.name}" not in source and f'"{code.value}"' not in source]
    assert missing == []


@pytest.mark.parametrize("profile", ["dicj", "sjm", "no-commission"])
def test_clean_shoes_raise_nothing_under_every_profile(profile: str) -> None:
    house = load_profile(profile)
    s = Scenario(profile=profile, min_bet=house.min_bet, max_bet=house.max_bet)
    for seed in range(3):
        s.play_shoe(
            random.Random(seed),
            lambda coup: [BetSpec("P1", Spot.BANKER, 2 * house.min_bet), BetSpec("P2", Spot.PLAYER, house.min_bet, seat="3")],
        )
    assert alerts(s.log()) == []
