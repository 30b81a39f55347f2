"""The table model of the core (``surveil.core.table``): a shoe's cards against what it read, a
round's bets and payments, each check with a legal case that finds nothing and an illegal one that
finds exactly its code and article."""

from __future__ import annotations

import msgspec
import pytest

from surveil.core.findings import AlertCode, Severity
from surveil.core.money import BetResult, Commission, Settlement, Spot, TieMove
from surveil.core.play import Outcome, RoundResult
from surveil.core.profiles import Burn, BurnPolicy, LastRound
from surveil.core.table import (
    Bet,
    HandCard,
    Round,
    Shoe,
    check_bet_amount,
    check_completed_round,
    check_late_bet,
    check_late_limit,
    check_payment,
    check_round_totals,
    check_squeeze,
    check_standing_box,
    check_table_limit,
    check_tie_change,
    check_void,
    decided_bets,
    outside_the_table,
    paid_unknown_bet,
    unpaid_bets,
)

PLAYER_WINS = RoundResult(8, 3, Outcome.PLAYER, False, False)
BANKER_WINS = RoundResult(3, 7, Outcome.BANKER, False, False)
TIE = RoundResult(5, 5, Outcome.TIE, False, False)


def codes(findings: list) -> list[str]:
    return [str(f.code) for f in findings]


def started_shoe(decks: int = 6, automatic: bool = False) -> Shoe:
    shoe = Shoe("S1")
    assert shoe.start(decks, automatic)
    return shoe


def round_with(*bets: Bet, min_bet: int = 100, max_bet: int = 10_000) -> Round:
    return Round("T01", "T01:S1:1", "S1", 1, "D1", "dicj", False, min_bet, max_bet, "HKD", {bet.bet_id: bet for bet in bets})


def dealt(rnd: Round, player: list[tuple[int, str]], banker: list[tuple[int, str]], declared: RoundResult) -> Round:
    rnd.complete([HandCard(i, c) for i, c in player], [HandCard(i, c) for i, c in banker], declared, None)
    return rnd


# ---- the shoe (Art. 1-4, 7-8) -------------------------------------------------------------------


def test_a_shoe_starts_once() -> None:
    shoe = started_shoe()
    assert not shoe.start(8, True)
    assert (shoe.decks, shoe.automatic) == (6, False)


def test_art1_the_seventh_copy_of_a_card_out_of_a_six_deck_shoe_is_card_overcount() -> None:
    shoe = started_shoe(decks=6)
    for index in range(1, 7):
        assert shoe.read(index, "AS", face_up=False) == []
    [finding] = shoe.read(7, "AS", face_up=False)
    assert (finding.code, finding.article) == (AlertCode.CARD_OVERCOUNT, "Art. 1")
    assert finding.evidence == {"card": "AS", "index": 7, "copies_seen": 7, "decks": 6}


def test_art4_a_card_out_face_up_is_recorded_and_stays_valid() -> None:
    shoe = started_shoe()
    [finding] = shoe.read(1, "KH", face_up=True)
    assert (finding.code, finding.article) == (AlertCode.CARD_EXPOSED, "Art. 4")
    assert "stay valid" in finding.summary
    assert shoe.reads == {1: "KH"} and shoe.last_index == 1


def test_art2_1_the_cut_card_needs_about_12_cards_behind_it_and_counts_once() -> None:
    shoe = started_shoe(decks=6)  # 312 cards
    assert shoe.cut_card(300) is None  # 12 behind
    assert shoe.cut_card(305) is None  # a second report changes nothing
    assert shoe.cut_index == 300
    shallow = started_shoe(decks=6)
    finding = shallow.cut_card(301)
    assert finding is not None and (finding.code, finding.article) == (AlertCode.CUT_CARD_DEPTH, "Art. 2.1")
    assert started_shoe(decks=6, automatic=True).cut_card(311) is None  # Art. 2.3: no cut card procedure


def test_art2_1_3_a_manual_shoe_dealt_past_the_cut_cards_last_place_without_it_is_cut_card_missing() -> None:
    deep = started_shoe(decks=6)  # 312 cards: the cut card lies at card 300 at the latest
    for index in range(1, 302):
        deep.read(index, "2C" if index % 2 else "3D", face_up=False)
    finding = deep.end()
    assert finding is not None and (finding.code, finding.article) == (AlertCode.CUT_CARD_MISSING, "Art. 2.1, 3")
    assert finding.evidence == {"cards_out": 301, "last_cut_card_place": 300, "minimum_behind": 12, "decks": 6}
    assert deep.ended and deep.end() is None  # judged once
    early = started_shoe(decks=6)
    for index in range(1, 301):
        early.read(index, "2C" if index % 2 else "3D", face_up=False)
    assert early.end() is None  # Art. 3.2: changed before the cut card's last place
    with_cut = started_shoe(decks=6)
    with_cut.cut_card(300)
    with_cut.read(301, "2C", face_up=False)
    assert with_cut.end() is None
    machine = started_shoe(decks=6, automatic=True)
    machine.read(311, "2C", face_up=False)
    assert machine.end() is None  # Art. 2.3


def test_art2_1_the_start_burn_follows_the_house_policy_but_not_with_a_machine() -> None:
    burn = Burn(BurnPolicy.DECKS)
    shoe = started_shoe(decks=6)
    for index, card in enumerate(["2C", "3C", "4C", "5C", "6C", "7C"], start=1):
        shoe.read(index, card, face_up=False)
    shoe.burn(range(1, 6), round_id=None)
    finding = shoe.check_start_burn(burn)
    assert finding is not None and finding.code is AlertCode.BURN_COUNT and finding.evidence["seen_count"] == 5
    shoe.burn([6], round_id=None)
    assert shoe.check_start_burn(burn) is None
    machine = started_shoe(decks=6, automatic=True)
    assert machine.check_start_burn(burn) is None  # Art. 2.3


def test_art7_a_hand_card_that_is_not_what_the_shoe_read_is_card_mismatch() -> None:
    shoe = started_shoe()
    for index, card in enumerate(["2H", "3D", "4S", "5C"], start=1):
        shoe.read(index, card, face_up=False)
    right = dealt(round_with(), [(1, "2H"), (3, "4S")], [(2, "3D"), (4, "5C")], RoundResult(6, 8, Outcome.BANKER, False, False))
    assert shoe.check_round(right, LastRound.FINISH) == []
    other = started_shoe()
    for index, card in enumerate(["2H", "3D", "4S", "5C"], start=1):
        other.read(index, card, face_up=False)
    switched = dealt(round_with(), [(1, "2H"), (3, "9S")], [(2, "3D"), (4, "5C")], RoundResult(1, 8, Outcome.BANKER, False, False))
    [finding] = other.check_round(switched, LastRound.FINISH)
    assert (finding.code, finding.article) == (AlertCode.CARD_MISMATCH, "Art. 7")
    assert finding.evidence == {"hand": "player", "index": 3, "in_hand": "9S", "shoe_read": "4S"}


def test_art7_a_hand_card_at_an_index_never_read_stands_for_the_first_loose_card_and_is_one_finding() -> None:
    shoe = started_shoe()
    cards = ["2H", "3D", "4S", "5C", "9H", "8D", "7C", "KS"]
    for index, card in enumerate(cards, start=1):
        shoe.read(index, card, face_up=False)
    wrong = dealt(round_with(), [(1, "2H"), (3, "4S")], [(200, "3D"), (4, "5C")], RoundResult(6, 8, Outcome.BANKER, False, False))
    assert shoe.stand_ins(wrong) == {200: 2}
    player, banker = wrong.hands(shoe.stand_ins(wrong))
    assert [c.index for c in banker] == [2, 4]  # in its place: the order of the deal holds
    [finding] = check_completed_round(wrong, shoe, LastRound.FINISH)
    assert (finding.code, finding.article) == (AlertCode.CARD_MISMATCH, "Art. 7")
    assert finding.evidence == {
        "hand": "banker",
        "index": 200,
        "in_hand": "3D",
        "shoe_read": None,
        "stands_for": {"index": 2, "card": "3D"},
    }
    assert "a wrong shoe index" in finding.summary
    later = dealt(round_with(), [(5, "9H"), (7, "7C")], [(6, "8D"), (8, "KS")], RoundResult(6, 8, Outcome.BANKER, False, False))
    assert check_completed_round(later, shoe, LastRound.FINISH) == []  # nothing loose is left behind
    # Another card than the one the shoe read in its place is a switched card, still one finding.
    other = started_shoe()
    for index, card in enumerate(cards, start=1):
        other.read(index, card, face_up=False)
    switched = dealt(round_with(), [(1, "2H"), (3, "4S")], [(200, "3C"), (4, "5C")], RoundResult(6, 8, Outcome.BANKER, False, False))
    [finding] = check_completed_round(switched, other, LastRound.FINISH)
    assert "a switched card" in finding.summary and finding.evidence["stands_for"] == {"index": 2, "card": "3D"}


def test_a_round_does_not_wait_for_an_index_past_the_end_of_the_shoe() -> None:
    shoe = started_shoe(decks=6)  # 312 cards
    for index, card in enumerate(["2H", "3D", "4S"], start=1):
        shoe.read(index, card, face_up=False)
    rnd = dealt(round_with(), [(1, "2H"), (3, "4S")], [(2, "3D"), (313, "5C")], RoundResult(6, 8, Outcome.BANKER, False, False))
    assert shoe.has_cards_of(rnd)
    rnd.banker = (rnd.banker[0], HandCard(312, "5C"))
    assert not shoe.has_cards_of(rnd)  # the shoe's last card may still come


def test_art2_7_8_a_card_out_of_the_shoe_is_burned_or_in_a_hand_and_is_judged_once() -> None:
    shoe = started_shoe()
    for index, card in enumerate(["9C", "2H", "3D", "4S", "5C", "6H"], start=1):
        shoe.read(index, card, face_up=False)
    shoe.burn([1], round_id=None)
    rnd = dealt(round_with(), [(2, "2H"), (5, "5C")], [(3, "3D"), (6, "6H")], RoundResult(7, 9, Outcome.BANKER, False, False))
    [finding] = shoe.check_round(rnd, LastRound.FINISH)  # card 4 went nowhere
    assert (finding.code, finding.article, finding.evidence) == (AlertCode.CARD_UNACCOUNTED, "Art. 2, 7-8", {"card": "4S", "index": 4})
    assert shoe.unaccounted(up_to=6) == []  # already judged


def test_a_shoe_read_back_between_rounds_judges_the_next_round_as_the_shoe_kept_in_memory() -> None:
    """A shoe is stored between events (the detectors' in their changelog) without the cards its
    rounds were dealt: every card up to a checked round's last is judged. One read back, with or
    without the ``dealt`` map a shoe stored before 2026-12-03 carries, finds what the shoe kept in
    memory finds: card 4 and card 8 unaccounted for."""
    kept = started_shoe()
    for index, card in enumerate(["9C", "2H", "3D", "4S", "5C", "6H", "7D", "8S", "9H", "TC", "JD"], start=1):
        kept.read(index, card, face_up=False)
    kept.burn([1], round_id=None)
    first = dealt(round_with(), [(2, "2H"), (5, "5C")], [(3, "3D"), (6, "6H")], RoundResult(7, 9, Outcome.BANKER, False, False))
    assert [f.evidence["index"] for f in kept.check_round(first, LastRound.FINISH)] == [4]
    stored = msgspec.msgpack.encode(kept)
    assert b"dealt" not in stored
    before = msgspec.to_builtins(kept) | {"dealt": {2: "T01:S1:1", 3: "T01:S1:1", 5: "T01:S1:1", 6: "T01:S1:1"}}
    for shoe in (kept, msgspec.msgpack.decode(stored, type=Shoe), msgspec.msgpack.decode(msgspec.msgpack.encode(before), type=Shoe)):
        second = dealt(round_with(), [(7, "7D"), (10, "TC")], [(9, "9H"), (11, "JD")], RoundResult(4, 9, Outcome.BANKER, False, False))
        second.round_id, second.round_no = "T01:S1:2", 2
        assert [(f.code, f.evidence["index"]) for f in shoe.check_round(second, LastRound.FINISH)] == [(AlertCode.CARD_UNACCOUNTED, 8)]
        assert shoe.unaccounted(up_to=11) == []


def test_art3_1_no_round_opens_after_the_cut_card_beyond_the_house_policy() -> None:
    shoe = started_shoe()
    for index in range(1, 13):
        shoe.read(index, "2C" if index % 2 else "3D", face_up=False)
    shoe.burn([1, 2], round_id=None)
    shoe.cut_card(2)  # out after card 2, before the first round's cards
    first = dealt(round_with(), [(3, "2C"), (5, "2C")], [(4, "3D"), (6, "3D")], RoundResult(4, 6, Outcome.BANKER, False, False))
    assert shoe.check_round(first, LastRound.FINISH) == []  # the round the cut card belongs to
    second = dealt(round_with(), [(7, "2C"), (9, "2C")], [(8, "3D"), (10, "3D")], RoundResult(4, 6, Outcome.BANKER, False, False))
    second.round_no = 2
    [finding] = shoe.check_round(second, LastRound.FINISH)
    assert (finding.code, finding.article) == (AlertCode.ROUNDS_AFTER_CUT_CARD, "Art. 3.1")


def test_art2_2_a_fourth_demonstration_round_in_a_shoe_is_demo_rounds() -> None:
    shoe = started_shoe()
    assert [shoe.open_round(demo=True) for _ in range(3)] == [[], [], []]
    [finding] = shoe.open_round(demo=True)
    assert (finding.code, finding.article) == (AlertCode.DEMO_ROUNDS, "Art. 2.2")


def test_art2_2_a_demonstration_round_after_the_shoes_first_real_round_is_demo_rounds() -> None:
    shoe = started_shoe()
    assert shoe.open_round(demo=True) == []
    assert shoe.open_round(demo=False) == []
    [finding] = shoe.open_round(demo=True)
    assert (finding.code, finding.article) == (AlertCode.DEMO_ROUNDS, "Art. 2.2")
    assert finding.evidence == {"demo_rounds": 2, "real_rounds_before": 1}


def test_the_shoe_has_a_rounds_cards_once_it_read_them_or_ended() -> None:
    shoe = started_shoe()
    rnd = dealt(round_with(), [(1, "2C"), (3, "2C")], [(2, "3D"), (4, "3D")], RoundResult(4, 6, Outcome.BANKER, False, False))
    shoe.read(1, "2C", face_up=False)
    assert not shoe.has_cards_of(rnd)
    shoe.ended = True
    assert shoe.has_cards_of(rnd)


def test_art2_8_a_shoe_index_in_two_hands_in_two_rounds_or_burned_then_dealt_is_card_reused() -> None:
    shoe = started_shoe()
    shoe.burn([1, 2], round_id=None)
    first = dealt(round_with(), [(3, "2C"), (5, "2C")], [(4, "3D"), (6, "3D")], RoundResult(4, 6, Outcome.BANKER, False, False))
    assert shoe.place(first) == []
    assert (shoe.placed, shoe.placed_rounds) == ({3: 0, 4: 0, 5: 0, 6: 0}, (first.round_id,))
    again = dealt(round_with(), [(2, "9S"), (7, "2C")], [(5, "2C"), (8, "3D")], RoundResult(1, 5, Outcome.BANKER, False, False))
    again.round_id = "T01:S1:2"
    burned, earlier = shoe.place(again)
    assert (burned.code, burned.article) == (AlertCode.CARD_REUSED, "Art. 2, 8")
    assert burned.evidence == {"index": 2, "card": "9S", "hand": "player", "first": {"where": "burned", "round_id": None}}
    assert earlier.evidence["first"] == {"where": "an earlier round", "round_id": first.round_id}
    assert "dealt in round T01:S1:1" in earlier.summary
    both = dealt(round_with(), [(9, "9H"), (11, "KD")], [(10, "8C"), (11, "KD")], RoundResult(9, 8, Outcome.PLAYER, False, False))
    [twice] = shoe.place(both)
    assert twice.evidence["first"] == {"where": "player hand", "round_id": both.round_id} and twice.evidence["hand"] == "banker"


def test_a_stored_shoe_names_each_rounds_id_once_and_one_stored_before_reads_back_the_same() -> None:
    """The detectors write a table's shoe at every commit: a card placed names its round by the
    round's place among the rounds placed, not by its id. A shoe stored before that, with each
    card's round id, reads back finding the same card reused in the same earlier round."""
    shoe = started_shoe()
    rounds = []
    for number in range(1, 4):
        rnd = dealt(
            round_with(),
            [(4 * number - 3, "2C"), (4 * number - 1, "2C")],
            [(4 * number - 2, "3D"), (4 * number, "3D")],
            RoundResult(4, 6, Outcome.BANKER, False, False),
        )
        rnd.round_id = f"T01:S1:{number}"
        assert shoe.place(rnd) == []
        rounds.append(rnd.round_id)
    stored = msgspec.msgpack.encode(shoe)
    assert [stored.count(round_id.encode()) for round_id in rounds] == [1, 1, 1]
    before = msgspec.to_builtins(shoe)
    del before["placed_at"], before["placed_rounds"]
    before["placed"] = {index: rounds[(index - 1) // 4] for index in range(1, 13)}
    for read in (msgspec.msgpack.decode(stored, type=Shoe), msgspec.msgpack.decode(msgspec.msgpack.encode(before), type=Shoe)):
        assert (read.placed, read.placed_rounds, read.legacy_placed) == (shoe.placed, shoe.placed_rounds, {})
        again = dealt(round_with(), [(13, "2C"), (6, "3D")], [(14, "3D"), (15, "2C")], RoundResult(4, 6, Outcome.BANKER, False, False))
        again.round_id = "T01:S1:4"
        [reused] = read.place(again)
        assert reused.evidence["first"] == {"where": "an earlier round", "round_id": "T01:S1:2"}
        assert read.placed_rounds == (*rounds, "T01:S1:4") and read.placed[15] == 3
    for ordinal in (3, -1):  # a card placed in a round the shoe does not name: refused, not misread
        corrupt = msgspec.to_builtins(shoe)
        corrupt["placed_at"][12] = ordinal
        with pytest.raises(msgspec.ValidationError, match="a round the shoe does not name"):
            msgspec.msgpack.decode(msgspec.msgpack.encode(corrupt), type=Shoe)


def test_art8_a_burn_between_a_rounds_first_and_last_card_is_burn_mid_round() -> None:
    shoe = started_shoe()
    rnd = round_with()
    shoe.burn([3], rnd.round_id)  # at the round's start: before its first card
    shoe.burn([6], rnd.round_id)  # after its first card
    played = dealt(rnd, [(4, "2C"), (7, "2C")], [(5, "3D"), (8, "3D")], RoundResult(4, 6, Outcome.BANKER, False, False))
    [finding] = shoe.place(played)
    assert (finding.code, finding.article) == (AlertCode.BURN_MID_ROUND, "Art. 8")
    assert finding.evidence == {"burned": [6], "first_card": 4, "last_card": 8}
    start_only = started_shoe()
    start_only.burn([3], rnd.round_id)
    assert (
        start_only.place(
            dealt(round_with(), [(4, "2C"), (6, "2C")], [(5, "3D"), (7, "3D")], RoundResult(4, 6, Outcome.BANKER, False, False))
        )
        == []
    )


def test_art15_a_standing_bettors_chips_in_a_seats_box_is_standing_bet_on_seat_box() -> None:
    standing = Bet("B1", "P8", "standing", Spot.BANKER, 2000, box="3")
    finding = check_standing_box(standing)
    assert finding is not None and (finding.code, finding.article) == (AlertCode.STANDING_BET_ON_SEAT_BOX, "Art. 15")
    assert finding.evidence == {"bet_id": "B1", "box": "3", "seat": "standing", "spot": "banker", "amount": 2000, "stake": 2000}
    assert check_standing_box(Bet("B2", "P8", "standing", Spot.BANKER, 2000, box="standing")) is None
    assert check_standing_box(Bet("B3", "P3", "3", Spot.BANKER, 2000, box="3")) is None
    assert check_standing_box(Bet("B4", "P8", "standing", Spot.BANKER, 2000)) is None  # the box not said: not judged


def test_art1_a_seat_or_box_past_the_tables_seats_is_outside_the_table() -> None:
    rnd = round_with()
    assert not outside_the_table(rnd, "12")  # seats not said
    rnd.seats = 9
    assert [outside_the_table(rnd, place) for place in ("1", "9", "10", "standing")] == [False, False, True, False]


# ---- voided rounds (Art. 4, 10) -----------------------------------------------------------------


def voided_round(player: list[tuple[int, str | None]], banker: list[tuple[int, str | None]]) -> Round:
    rnd = round_with(Bet("B1", "P1", "1", Spot.BANKER, 300), Bet("B2", "P2", "2", Spot.PLAYER, 200))
    rnd.void("dealer's call", [HandCard(i, c) for i, c in player], [HandCard(i, c) for i, c in banker])
    return rnd


def shoe_of(*cards: str, face_up: int = 0) -> Shoe:
    shoe = started_shoe()
    for index, card in enumerate(cards, start=1):
        shoe.read(index, card, face_up=index == face_up)
    return shoe


def test_art10_a_void_with_no_misdeal_in_the_round_is_critical() -> None:
    rnd = voided_round([(1, "2H"), (3, "4S")], [(2, "3D"), (4, "5C")])
    finding = check_void(rnd, shoe_of("2H", "3D", "4S", "5C"))
    assert (finding.code, finding.article, finding.severity) == (AlertCode.ROUND_VOIDED, "Art. 10", Severity.CRITICAL)
    assert finding.evidence["reason"] == "dealer's call" and finding.evidence["misdeals"] == [] and finding.evidence["stake"] == 500
    assert finding.evidence["cards"]["player"] == [{"index": 1, "card": "2H"}, {"index": 3, "card": "4S"}]
    nothing_dealt = round_with()
    nothing_dealt.void("table closed", [], [])
    assert check_void(nothing_dealt, started_shoe()).severity is Severity.CRITICAL


def test_art4_a_void_for_a_card_exposed_face_up_is_critical() -> None:
    rnd = voided_round([(1, "2H"), (3, "4S")], [(2, "3D")])
    finding = check_void(rnd, shoe_of("2H", "3D", "4S", face_up=3))
    assert (finding.article, finding.severity, finding.evidence["exposed"]) == (
        "Art. 4, 10",
        Severity.CRITICAL,
        [{"index": 3, "card": "4S"}],
    )
    assert "Art. 4 keeps the round and its bets valid" in finding.summary


@pytest.mark.parametrize(
    ("player", "banker", "cards", "misdeal"),
    [
        ([(1, "8H"), (2, "KD")], [(3, "2C"), (4, "3S")], ("8H", "KD", "2C", "3S"), "DEAL_ORDER"),  # P, P, B, B (Art. 7)
        ([(2, "2H")], [(1, "3D")], ("3D", "2H"), "DEAL_ORDER"),  # the Banker's card first, in a round stopped at two
        ([(1, "6H"), (3, "KD"), (5, "4D")], [(2, "2C"), (4, "3S")], ("6H", "2C", "KD", "3S", "4D"), "DRAW_PLAYER_EXTRA"),  # Art. 9(2)
        ([(1, "2H"), (3, "4S")], [(2, "3D"), (4, "9C")], ("2H", "3D", "4S", "5C"), "CARD_MISMATCH"),  # not what the shoe read
        ([(1, "2H"), (3, None)], [(2, "3D")], ("2H", "3D"), "CARD_MISMATCH"),  # never read by the shoe
    ],
)
def test_art10_a_void_after_a_misdeal_the_detectors_find_is_a_warning(
    player: list[tuple[int, str | None]], banker: list[tuple[int, str | None]], cards: tuple[str, ...], misdeal: str
) -> None:
    shoe = shoe_of(*cards)
    shoe.ended = True
    finding = check_void(voided_round(player, banker), shoe)
    assert (finding.code, finding.article, finding.severity) == (AlertCode.ROUND_VOIDED, "Art. 10", Severity.WARNING)
    assert [d["code"] for d in finding.evidence["misdeals"]] == [misdeal]


def test_art10_a_player_draw_still_missing_when_the_round_stopped_is_no_misdeal() -> None:
    rnd = voided_round([(1, "2H"), (3, "3S")], [(2, "3D"), (4, "KC")])  # the Player (5) was still to draw
    assert check_void(rnd, shoe_of("2H", "3D", "3S", "KC")).severity is Severity.CRITICAL


def test_a_round_voided_without_its_hands_is_judged_on_the_cards_burned_for_it() -> None:
    shoe = shoe_of("2H", "3D", "4S", face_up=2)
    rnd = round_with()
    rnd.void("old log", None, None)
    assert rnd.hands_unreported
    shoe.burn([1, 2, 3, 4], rnd.round_id)
    assert shoe.cards_of(rnd) == [1, 2, 3, 4]
    assert not shoe.has_cards_of(rnd)  # card 4 is still to be read
    shoe.read(4, "5C", face_up=False)
    assert shoe.has_cards_of(rnd)
    finding = check_void(rnd, shoe)
    assert finding.evidence["cards"] == {"burned_for_the_round": [1, 2, 3, 4]}
    assert finding.evidence["exposed"] == [{"index": 2, "card": "3D"}]


# ---- the bets (Art. 2.2, 12-16) -----------------------------------------------------------------


def test_art13_a_bet_moved_after_bets_closed_is_late() -> None:
    bet = Bet("B1", "P1", "1", Spot.PLAYER, 200)
    rnd = round_with(bet)
    assert check_late_bet(rnd, bet, "placed") is None
    rnd.closed = True
    finding = check_late_bet(rnd, bet, "changed")
    assert finding is not None and (finding.code, finding.article) == (AlertCode.LATE_BET, "Art. 13")
    assert finding.evidence["action"] == "changed" and finding.evidence["stake"] == 200


def test_house_rules_the_minimum_and_the_banker_multiple_carry_the_stake() -> None:
    rnd = round_with(min_bet=100)
    assert check_bet_amount(rnd, Bet("B1", "P1", "1", Spot.BANKER, 300)) == []
    found = check_bet_amount(rnd, Bet("B2", "P1", "1", Spot.BANKER, 150))
    assert codes(found) == ["BANKER_BET_MULTIPLE"] and found[0].evidence["stake"] == 150
    assert codes(check_bet_amount(rnd, Bet("B3", "P1", "1", Spot.PLAYER, 50))) == ["BET_BELOW_MINIMUM"]


def test_art12_a_carried_bet_is_judged_against_the_bet_the_tie_left() -> None:
    bet = Bet("B1", "P1", "1", Spot.BANKER, 500, carried=(Spot.BANKER, 500))
    allowed = frozenset({TieMove.KEEP, TieMove.INCREASE})  # the SJM house
    assert check_tie_change(bet, (Spot.BANKER, 800), allowed, "sjm") == []
    [finding] = check_tie_change(bet, (Spot.PLAYER, 500), allowed, "sjm")
    assert (finding.code, finding.article, finding.evidence["stake"]) == (AlertCode.TIE_BET_MOVED, "Art. 12(3)(b)", 500)
    assert codes(check_tie_change(bet, None, allowed, "sjm")) == ["TIE_BET_WITHDRAWN"]


def test_art14_the_banker_player_difference_is_held_to_the_table_limit() -> None:
    within = round_with(Bet("B1", "P1", "1", Spot.BANKER, 9_000), Bet("B2", "P2", "2", Spot.PLAYER, 8_000), max_bet=1_000)
    assert check_table_limit(within) == []
    beyond = round_with(Bet("B1", "P1", "1", Spot.BANKER, 9_000), Bet("B2", "P2", "2", Spot.PLAYER, 7_000), max_bet=1_000)
    [finding] = check_table_limit(beyond)
    assert (finding.code, finding.article) == (AlertCode.TABLE_LIMIT, "Art. 14")
    assert finding.evidence["difference"] == 2_000 and finding.evidence["stake"] == 16_000


def test_art14_a_withdrawn_bet_does_not_count_against_the_limit() -> None:
    big = Bet("B1", "P1", "1", Spot.TIE, 5_000, withdrawn=True)
    assert check_table_limit(round_with(big, max_bet=1_000)) == []


def test_art14_a_late_bet_that_leaves_the_difference_above_the_limit_and_larger_is_table_limit() -> None:
    banker, player = Bet("B1", "P1", "1", Spot.BANKER, 6_000), Bet("B2", "P2", "2", Spot.PLAYER, 2_000)
    rnd = round_with(banker, player)  # limit 10,000: difference 4,000
    rnd.closed = True
    late = rnd.bets["B3"] = Bet("B3", "P3", "3", Spot.BANKER, 7_000)
    [finding] = check_late_limit(rnd, late, None)
    assert (finding.code, finding.article) == (AlertCode.TABLE_LIMIT, "Art. 14")
    assert finding.evidence["difference"] == 11_000 and finding.evidence["bet_id"] == "B3" and finding.evidence["late"]
    small = round_with(banker, player)
    small.closed = True
    within = small.bets["B3"] = Bet("B3", "P3", "3", Spot.BANKER, 5_000)
    assert check_late_limit(small, within, None) == []  # 9,000: within the limit


def test_art14_a_late_change_or_withdrawal_is_judged_against_the_stakes_before_it() -> None:
    banker, player = Bet("B1", "P1", "1", Spot.BANKER, 12_000), Bet("B2", "P2", "2", Spot.PLAYER, 5_000)
    rnd = round_with(banker, player)
    rnd.closed = True
    player.withdrawn = True  # the difference goes from 7,000 to 12,000
    [finding] = check_late_limit(rnd, player, (Spot.PLAYER, 5_000))
    assert finding.evidence["difference"] == 12_000
    over = round_with(Bet("B1", "P1", "1", Spot.BANKER, 30_000), Bet("B2", "P2", "2", Spot.TIE, 2_000))
    over.closed = True
    moved = over.bets["B2"]
    moved.spot = Spot.PLAYER  # Tie to Player: the difference shrinks, though still above the limit
    assert check_late_limit(over, moved, (Spot.TIE, 2_000)) == []
    tie = round_with(Bet("B1", "P1", "1", Spot.TIE, 9_000))
    tie.closed = True
    raised = tie.bets["B1"]
    raised.amount = 11_000
    [finding] = check_late_limit(tie, raised, (Spot.TIE, 9_000))
    assert finding.evidence["spot"] == "tie" and finding.evidence["total"] == 11_000


def test_art16_the_seated_bettor_with_the_largest_stake_holds_the_cards_standing_ones_do_not_count() -> None:
    rnd = round_with(
        Bet("B1", "P1", "1", Spot.BANKER, 500),
        Bet("B2", "P2", "2", Spot.BANKER, 300),
        Bet("B3", "P3", "standing", Spot.BANKER, 5_000),
    )
    rnd.squeezed_by = "P1"
    assert check_squeeze(rnd, allowed=True) is None
    rnd.squeezed_by = "P3"
    finding = check_squeeze(rnd, allowed=True)
    assert finding is not None and (finding.code, finding.article) == (AlertCode.SQUEEZE_HOLDER, "Art. 16(2)")
    assert finding.evidence["entitled"] == ["P1"] and finding.evidence["stake"] == 5_800
    rnd.squeezed_by = "P1"
    refused = check_squeeze(rnd, allowed=False)
    assert refused is not None and refused.article == "Art. 16(1)"


def test_art11_decided_bets_are_the_player_and_banker_bets_of_a_real_round_that_did_not_tie() -> None:
    player, banker, tie = (
        Bet("B1", "P1", "1", Spot.PLAYER, 100),
        Bet("B2", "P2", "2", Spot.BANKER, 100),
        Bet("B3", "P3", "3", Spot.TIE, 100),
    )
    rnd = dealt(round_with(player, banker, tie), [], [], PLAYER_WINS)
    assert [(bet.bet_id, won) for bet, won in decided_bets(rnd)] == [("B1", True), ("B2", False)]
    assert decided_bets(dealt(round_with(player, banker), [], [], TIE)) == []
    demo = dealt(round_with(player), [], [], PLAYER_WINS)
    demo.demo = True
    assert decided_bets(demo) == []


def test_art12_carry_over_takes_the_named_bets_of_a_completed_round_not_the_withdrawn_ones() -> None:
    kept, gone = Bet("B1", "P1", "1", Spot.BANKER, 300), Bet("B2", "P2", "2", Spot.PLAYER, 200, withdrawn=True)
    previous = dealt(round_with(kept, gone), [], [], TIE)
    following = round_with()
    following.carry_over(previous, ["B1", "B2", "B9"])
    assert list(following.bets) == ["B1"] and following.bets["B1"].carried == (Spot.BANKER, 300)
    unfinished = round_with(kept)
    following = round_with()
    assert following.carry_over(unfinished, ["B1"]) == []
    assert following.bets == {}


def test_art12_1_a_bet_the_tie_carried_that_the_next_round_leaves_out_was_withdrawn() -> None:
    banker, player, tie_bet = (
        Bet("B1", "P1", "1", Spot.BANKER, 300),
        Bet("B2", "P2", "2", Spot.PLAYER, 200),
        Bet("B3", "P3", "3", Spot.TIE, 100),
    )
    previous = dealt(round_with(banker, player, tie_bet), [], [], TIE)
    following = round_with()
    [dropped] = following.carry_over(previous, ["B1"])
    assert (dropped.bet_id, dropped.carried) == ("B2", (Spot.PLAYER, 200))  # the Tie bet was decided, not carried
    [finding] = check_tie_change(dropped, None, frozenset({TieMove.KEEP, TieMove.INCREASE}), "sjm")
    assert (finding.code, finding.article) == (AlertCode.TIE_BET_WITHDRAWN, "Art. 12(1)")
    assert check_tie_change(dropped, None, frozenset(TieMove), "dicj") == []
    decided = dealt(round_with(banker, player), [], [], BANKER_WINS)
    assert round_with().carry_over(decided, []) == []  # no tie, nothing carried


# ---- the payments (Art. 10, 12, 17, 18) --------------------------------------------------------


def test_art17_18_a_bet_paid_as_the_rules_pay_finds_nothing() -> None:
    bet = Bet("B1", "P1", "1", Spot.BANKER, 100)
    rnd = dealt(round_with(bet), [], [], BANKER_WINS)
    assert check_payment(rnd, bet, Settlement(BetResult.WIN, 95, 5), Spot.BANKER, 100, Commission.FIVE_PERCENT) is None


@pytest.mark.parametrize(
    ("spot", "declared", "paid", "article"),
    [
        (Spot.PLAYER, PLAYER_WINS, Settlement(BetResult.WIN, 90, 0), "Art. 17"),
        (Spot.BANKER, BANKER_WINS, Settlement(BetResult.WIN, 96, 4), "Art. 18"),
        (Spot.BANKER, TIE, Settlement(BetResult.LOSE, -100, 0), "Art. 12"),
    ],
)
def test_art12_17_18_a_wrong_payment_names_the_article_it_breaks(spot: Spot, declared: RoundResult, paid: Settlement, article: str) -> None:
    bet = Bet("B1", "P1", "1", spot, 100)
    rnd = dealt(round_with(bet), [], [], declared)
    finding = check_payment(rnd, bet, paid, spot, 100, Commission.FIVE_PERCENT)
    assert finding is not None and (finding.code, finding.article) == (AlertCode.PAYOUT_MISMATCH, article)


def test_art10_a_voided_round_owes_every_stake_back() -> None:
    bet = Bet("B1", "P1", "1", Spot.TIE, 100)
    rnd = round_with(bet)
    rnd.voided = True
    assert rnd.settlements(Commission.FIVE_PERCENT) == [(bet, Settlement(BetResult.PUSH, 0, 0))]
    assert check_payment(rnd, bet, Settlement(BetResult.LOSE, -100, 0), Spot.TIE, 100, Commission.FIVE_PERCENT) is not None


def test_art17_a_bet_paid_twice_counts_twice_and_names_the_first_payment() -> None:
    bet = Bet("B1", "P1", "1", Spot.PLAYER, 100)
    rnd = dealt(round_with(bet), [], [], PLAYER_WINS)
    win = Settlement(BetResult.WIN, 100, 0)
    assert rnd.record_payment("B1", "s1", 100, win) is None
    assert rnd.record_payment("B1", "s2", 100, win) == "s1"
    assert rnd.paid == {"B1": "s1"} and rnd.paid_totals == (200, 400, 0, -200)


def test_art17_18_round_totals_must_be_the_sum_of_its_bets() -> None:
    bet = Bet("B1", "P1", "1", Spot.BANKER, 100)
    rnd = dealt(round_with(bet), [], [], BANKER_WINS)
    rnd.record_payment("B1", "s1", 100, Settlement(BetResult.WIN, 95, 5))
    assert check_round_totals(rnd, [100, 195, 5, -95]) is None
    finding = check_round_totals(rnd, [100, 200, 5, -100])
    assert finding is not None and finding.article == "Art. 17-18"
    assert set(finding.evidence["differences"]) == {"paid_out", "house_net"}


def test_art17_every_bet_of_an_ended_round_is_paid() -> None:
    paid, unpaid = Bet("B1", "P1", "1", Spot.PLAYER, 100), Bet("B2", "P2", "2", Spot.BANKER, 200)
    rnd = dealt(round_with(paid, unpaid), [], [], PLAYER_WINS)
    rnd.record_payment("B1", "s1", 100, Settlement(BetResult.WIN, 100, 0))
    [(bet, finding)] = unpaid_bets(rnd, Commission.FIVE_PERCENT)
    assert bet is unpaid and finding.code is AlertCode.UNSETTLED_BET and finding.evidence["due_net"] == -200
    assert paid_unknown_bet(rnd, "B9", 50, 50).code is AlertCode.PAYOUT_MISMATCH
