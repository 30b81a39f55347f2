"""``check_play`` on concrete rounds, one per rule, with the finding's article, summary and evidence."""

from __future__ import annotations

from surveil.core.cards import Card
from surveil.core.findings import AlertCode, Severity
from surveil.core.play import DealtCard, Outcome, RoundResult, check_play


def hand(*dealt: tuple[int, str]) -> list[DealtCard]:
    return [DealtCard(index, Card.parse(code)) for index, code in dealt]


def test_art7_9_a_legal_round() -> None:
    # Player 2+3 = 5 draws a 4 (9); Banker 3+K = 3 draws against a 4 (Art. 9(3)(2)): 6.
    player = hand((21, "2S"), (23, "3H"), (25, "4D"))
    banker = hand((22, "3C"), (24, "KS"), (26, "3S"))
    assert check_play(player, banker, RoundResult(9, 6, Outcome.PLAYER, False, False)) == []


def test_art9_4_1_banker_drawing_on_3_against_an_8_is_draw_banker_extra() -> None:
    player = hand((1, "AS"), (3, "4H"), (5, "8D"))  # 5, draws an 8: 3
    banker = hand((2, "3C"), (4, "KS"), (6, "2S"))  # 3 must stand against the 8
    (finding,) = check_play(player, banker, RoundResult(3, 5, Outcome.BANKER, False, False))
    assert (finding.code, finding.article, finding.severity) == (AlertCode.DRAW_BANKER_EXTRA, "Art. 9(4)(1)", Severity.CRITICAL)
    assert finding.summary == "Banker drew a third card on 3 but had to stand (Art. 9(4)(1))."
    assert finding.evidence["banker_indices"] == [2, 4, 6]
    assert (finding.evidence["expected_draws"], finding.evidence["seen_draws"]) == (0, 1)


def test_art9_3_6_banker_standing_on_5_when_the_player_stood_is_draw_banker_missing() -> None:
    player = hand((1, "6S"), (3, "KH"))  # 6 stands
    banker = hand((2, "5C"), (4, "KS"))  # 5 must draw
    (finding,) = check_play(player, banker, RoundResult(6, 5, Outcome.PLAYER, False, False))
    assert (finding.code, finding.article) == (AlertCode.DRAW_BANKER_MISSING, "Art. 9(3)(6)")
    assert finding.summary == "Banker stood on 5 but had to draw a third card (Art. 9(3)(6))."


def test_art9_2_player_drawing_against_a_banker_natural_is_draw_player_extra() -> None:
    player = hand((1, "2S"), (3, "KH"), (5, "7D"))
    banker = hand((2, "8C"), (4, "KS"))
    (finding,) = check_play(player, banker, RoundResult(9, 8, Outcome.PLAYER, False, False))
    assert (finding.code, finding.article) == (AlertCode.DRAW_PLAYER_EXTRA, "Art. 9(2)")


def test_art9_a_hand_draws_at_most_one_card() -> None:
    player = hand((1, "AS"), (3, "AH"), (5, "AD"), (6, "AC"))  # 2 draws, then once more
    banker = hand((2, "7C"), (4, "KS"))
    (finding,) = check_play(player, banker, RoundResult(4, 7, Outcome.BANKER, True, False))
    assert (finding.code, finding.article) == (AlertCode.DRAW_PLAYER_EXTRA, "Art. 9")
    assert "2 extra cards" in finding.summary


def test_art9_a_player_card_dealt_after_the_banker_drew_does_not_count_for_the_banker() -> None:
    """Player 6 stands, Banker 3 draws (Art. 9(3)(6)), then the Player is given an 8. The
    Banker's draw was right for the table it saw: only the Player's card and the order are wrong."""
    player = hand((1, "6S"), (3, "KH"), (6, "8D"))
    banker = hand((2, "3C"), (4, "KS"), (5, "2S"))
    findings = check_play(player, banker, RoundResult(4, 5, Outcome.BANKER, False, False))
    assert sorted(f.code for f in findings) == [AlertCode.DEAL_ORDER, AlertCode.DRAW_PLAYER_EXTRA]


def test_art7_banker_dealt_first_is_deal_order() -> None:
    player = hand((2, "2S"), (4, "5H"))
    banker = hand((1, "3C"), (3, "4S"))
    (finding,) = check_play(player, banker, RoundResult(7, 7, Outcome.TIE, False, False))
    assert (finding.code, finding.article, finding.severity) == (AlertCode.DEAL_ORDER, "Art. 7", Severity.WARNING)
    assert finding.evidence["seen_order"] == "BPBP"
    assert finding.evidence["expected_order"] == "PBPB"


def test_art7_the_banker_third_card_before_the_player_third_is_deal_order() -> None:
    player = hand((1, "AS"), (3, "AH"), (6, "5D"))  # 2, draws a 5: 7
    banker = hand((2, "KC"), (4, "QS"), (5, "4S"))  # 0, draws: 4
    (finding,) = check_play(player, banker, RoundResult(7, 4, Outcome.PLAYER, True, False))
    assert finding.code is AlertCode.DEAL_ORDER
    assert finding.evidence["seen_order"] == "PBPBBP"


def test_art7_a_hand_out_of_shoe_order_is_deal_order() -> None:
    player = hand((3, "7S"), (1, "KH"))  # right cards, wrong order within the hand
    banker = hand((2, "7C"), (4, "KS"))
    (finding,) = check_play(player, banker, RoundResult(7, 7, Outcome.TIE, False, False))
    assert finding.code is AlertCode.DEAL_ORDER
    assert "out of the order" in finding.summary


def test_art7_one_shoe_index_twice_breaks_no_order_it_is_a_card_reused() -> None:
    """Two hands holding one shoe index is a card used twice: ``Shoe.place`` finds CARD_REUSED
    (tests/unit/core/test_table.py); the order of the deal holds."""
    player = hand((1, "7S"), (3, "KH"))
    banker = hand((1, "7C"), (4, "KS"))
    assert check_play(player, banker, RoundResult(7, 7, Outcome.TIE, False, False)) == []
    later = hand((1, "7S"), (2, "KH"))
    assert [f.code for f in check_play(later, hand((3, "7C"), (1, "KS")), RoundResult(7, 7, Outcome.TIE, False, False))] == [
        AlertCode.DEAL_ORDER  # an index twice, and out of order as well
    ]


def test_art7_a_hand_with_fewer_than_two_cards_is_deal_order() -> None:
    player = hand((1, "7S"))
    banker = hand((2, "7C"), (3, "KS"))
    findings = check_play(player, banker, RoundResult(7, 7, Outcome.TIE, False, False))
    assert [(f.code, f.article) for f in findings] == [(AlertCode.DEAL_ORDER, "Art. 7")]


def test_art5_11_13_every_difference_is_in_one_result_mismatch() -> None:
    player = hand((1, "JS"), (3, "JH"), (5, "9D"))  # J J pair, 0 draws a 9: 9
    banker = hand((2, "5C"), (4, "2S"))  # 7 stands against a 9
    declared = RoundResult(8, 7, Outcome.BANKER, False, False)
    (finding,) = check_play(player, banker, declared)
    assert (finding.code, finding.article) == (AlertCode.RESULT_MISMATCH, "Art. 5")
    assert finding.evidence["differences"] == {
        "player_total": {"declared": 8, "cards_say": 9},
        "outcome": {"declared": "banker", "cards_say": "player"},
        "player_pair": {"declared": False, "cards_say": True},
    }
