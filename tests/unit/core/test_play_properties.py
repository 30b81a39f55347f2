"""Properties of ``deal`` and ``check_play`` over random shoes (Art. 5, 7, 9, 11-13).

A legal round dealt by ``deal`` has no finding; every single mutation of a legal round has the
finding it should. The expected draws come from ``transcribed_rules`` (the hand-written Art. 9
tableau), the expected totals from Art. 5 written out there: never from the code under test.

When one mutation legitimately causes more than one finding, the test says exactly which set is
expected, on one principle (the one ``check_play`` documents): each hand's draw is judged on what
was on the table when the decision was taken. The Player's decision rests on the first four cards;
the Banker's on those and the Player's third card if it left the shoe before the Banker's own
third card (when the Banker stood, on every Player card dealt). So:

- a card added to the Player's hand: DRAW_PLAYER_EXTRA; plus DEAL_ORDER when the Banker had
  drawn (the added card left the shoe after the Banker's third: Art. 7 order broken too); plus
  DRAW_BANKER_MISSING when the Banker stood and the added card, now the Player's third card,
  is one the Banker must draw against (the Banker stood on a table where it had to draw).
  Nothing about the Banker when it had drawn: its draw came before the added card.
- a card added to the Banker's hand: DRAW_BANKER_EXTRA only.
- the Player's third card removed: DRAW_PLAYER_MISSING; plus a Banker finding when what the
  Banker did is wrong against a Player who stood (e.g. Banker 6 drew against the removed 6, but
  against a Player who stood it must stand: DRAW_BANKER_EXTRA).
- the Banker's third card removed: DRAW_BANKER_MISSING only.
- two cards swapped between the hands (each keeping its shoe index): DEAL_ORDER, plus the draw
  findings the swapped hands call for.
- a wrong declared total, outcome or pair: RESULT_MISMATCH only.

The card mutations declare the result the mutated cards show (the table declared what lay on
it), so RESULT_MISMATCH must not appear there; one test declares the original result instead
and expects RESULT_MISMATCH exactly when the cards' result changed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from transcribed_rules import ART5_POINTS, banker_cell, player_cell, total_of

from surveil.core.cards import DECK, Card
from surveil.core.findings import AlertCode, Finding
from surveil.core.play import Coup, DealtCard, Outcome, RoundResult, check_play, deal
from surveil.core.shoe import shuffled_shoe

MUTATIONS = settings(max_examples=400)  # rare cases (Banker 3 against a late 8) need many draws


def hand(*codes: str) -> list[Card]:
    return [Card.parse(code) for code in codes]


SEVEN_CARDS = st.lists(st.sampled_from(DECK), min_size=7, max_size=7)
FIRST_INDEX = st.integers(min_value=1, max_value=400)  # burns and earlier rounds come before


# ---- an independent reading of a round --------------------------------------------------


def points(dealt: DealtCard) -> int:
    return ART5_POINTS[dealt.card.rank.value]


def result_by_hand(player: Sequence[DealtCard], banker: Sequence[DealtCard]) -> RoundResult:
    """Art. 5, 11-13 worked out from the transcription."""
    player_total = total_of([d.card.rank.value for d in player])
    banker_total = total_of([d.card.rank.value for d in banker])
    outcome = Outcome.PLAYER if player_total > banker_total else Outcome.BANKER if banker_total > player_total else Outcome.TIE
    return RoundResult(
        player_total,
        banker_total,
        outcome,
        player[0].card.rank == player[1].card.rank,
        banker[0].card.rank == banker[1].card.rank,
    )


def expected_draw_codes(player: Sequence[DealtCard], banker: Sequence[DealtCard]) -> list[AlertCode]:
    """The draw findings Art. 9 calls for, judging each hand on what was on the table."""
    player_two = (points(player[0]) + points(player[1])) % 10
    banker_two = (points(banker[0]) + points(banker[1])) % 10
    codes = []
    player_drew = len(player) - 2
    if player_drew > int(player_cell(player_two, banker_two).draws):
        codes.append(AlertCode.DRAW_PLAYER_EXTRA)
    elif player_drew < int(player_cell(player_two, banker_two).draws):
        codes.append(AlertCode.DRAW_PLAYER_MISSING)
    third_seen = len(player) >= 3 and (len(banker) < 3 or player[2].index < banker[2].index)
    banker_should = banker_cell(banker_two, player_two, points(player[2]) if third_seen else None).draws
    banker_drew = len(banker) - 2
    if banker_drew > int(banker_should):
        codes.append(AlertCode.DRAW_BANKER_EXTRA)
    elif banker_drew < int(banker_should):
        codes.append(AlertCode.DRAW_BANKER_MISSING)
    return codes


@dataclass(frozen=True)
class LegalRound:
    player: list[DealtCard]
    banker: list[DealtCard]
    next_card: DealtCard  # the card the shoe would give next
    coup: Coup

    @property
    def player_two(self) -> int:
        return (points(self.player[0]) + points(self.player[1])) % 10

    @property
    def banker_two(self) -> int:
        return (points(self.banker[0]) + points(self.banker[1])) % 10


def legal_round(cards: Sequence[Card], first_index: int) -> LegalRound:
    """The round ``deal`` plays from ``cards``, with the shoe indices Art. 7 gives its cards."""
    coup = deal(cards)
    at = [DealtCard(first_index + offset, card) for offset, card in enumerate(cards)]
    player = [at[0], at[2]]
    banker = [at[1], at[3]]
    following = 4
    if len(coup.player) == 3:
        player.append(at[following])
        following += 1
    if len(coup.banker) == 3:
        banker.append(at[following])
        following += 1
    assert [d.card for d in player] == list(coup.player), "deal broke Art. 7 (Player cards)"
    assert [d.card for d in banker] == list(coup.banker), "deal broke Art. 7 (Banker cards)"
    return LegalRound(player, banker, at[following], coup)


def replace(result: RoundResult, **changes: Any) -> RoundResult:
    fields = ("player_total", "banker_total", "outcome", "player_pair", "banker_pair")
    return RoundResult(**{**{name: getattr(result, name) for name in fields}, **changes})


def codes(findings: list[Finding]) -> list[AlertCode]:
    return sorted(f.code for f in findings)


# ---- legal rounds -----------------------------------------------------------------------


@given(cards=SEVEN_CARDS, first_index=FIRST_INDEX)
def test_art9_deal_draws_as_the_tableau_says(cards: list[Card], first_index: int) -> None:
    r = legal_round(cards, first_index)
    assert len(r.player) == 2 + player_cell(r.player_two, r.banker_two).draws
    third = points(r.player[2]) if len(r.player) == 3 else None
    assert len(r.banker) == 2 + banker_cell(r.banker_two, r.player_two, third).draws
    assert r.coup.result == result_by_hand(r.player, r.banker)


@given(cards=SEVEN_CARDS, first_index=FIRST_INDEX)
def test_art7_9_a_legal_round_has_no_finding(cards: list[Card], first_index: int) -> None:
    r = legal_round(cards, first_index)
    assert check_play(r.player, r.banker, result_by_hand(r.player, r.banker)) == []


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), decks=st.integers(min_value=6, max_value=12))
def test_art7_9_every_round_of_a_shuffled_shoe_has_no_finding(seed: int, decks: int) -> None:
    """Whole shoes: burn one card per deck, then deal rounds until 14 cards are left."""
    shoe = shuffled_shoe(decks, random.Random(seed))
    position = decks  # the burn: cards 1..decks
    rounds = 0
    while len(shoe) - position > 14:
        r = legal_round(shoe[position : position + 7], position + 1)
        assert check_play(r.player, r.banker, r.coup.result) == []
        position += r.coup.cards_used
        rounds += 1
    assert rounds > 50


# ---- mutations of a legal round ---------------------------------------------------------


@MUTATIONS
@given(cards=SEVEN_CARDS, first_index=FIRST_INDEX)
# Player 6 stands, Banker 3 draws (Art. 9(3)(6)); then the Player is given an 8. The Banker drew
# before the 8 came out, so its draw was right: no Banker finding.
@example(cards=hand("6S", "3H", "KS", "KH", "2D", "8C", "9C"), first_index=1)
# Player 6 and Banker 6 stand; then the Player is given a 7: the Banker, still to act, had to
# draw against it (Art. 9(3)(5)): DRAW_BANKER_MISSING.
@example(cards=hand("6S", "6H", "KS", "KH", "7D", "8C", "9C"), first_index=1)
def test_art9_a_card_added_to_the_player_hand_is_draw_player_extra(cards: list[Card], first_index: int) -> None:
    r = legal_round(cards, first_index)
    player = [*r.player, r.next_card]
    expected = [AlertCode.DRAW_PLAYER_EXTRA]
    if len(r.banker) == 3:
        expected.append(AlertCode.DEAL_ORDER)
    elif len(r.player) == 2 and banker_cell(r.banker_two, r.player_two, points(r.next_card)).draws:
        expected.append(AlertCode.DRAW_BANKER_MISSING)
    findings = check_play(player, r.banker, result_by_hand(player, r.banker))
    assert codes(findings) == sorted(expected)
    assert expected_draw_codes(player, r.banker) == [c for c in expected if c is not AlertCode.DEAL_ORDER]
    (extra,) = [f for f in findings if f.code is AlertCode.DRAW_PLAYER_EXTRA]
    assert extra.article == ("Art. 9" if len(r.player) == 3 else player_cell(r.player_two, r.banker_two).article)


@MUTATIONS
@given(cards=SEVEN_CARDS, first_index=FIRST_INDEX)
def test_art9_a_card_added_to_the_banker_hand_is_draw_banker_extra(cards: list[Card], first_index: int) -> None:
    r = legal_round(cards, first_index)
    banker = [*r.banker, r.next_card]
    findings = check_play(r.player, banker, result_by_hand(r.player, banker))
    assert codes(findings) == [AlertCode.DRAW_BANKER_EXTRA]
    third = points(r.player[2]) if len(r.player) == 3 else None
    stand_clause = banker_cell(r.banker_two, r.player_two, third).article
    assert findings[0].article == ("Art. 9" if len(r.banker) == 3 else stand_clause)


@MUTATIONS
@given(cards=SEVEN_CARDS, first_index=FIRST_INDEX)
def test_art9_1_the_player_third_card_removed_is_draw_player_missing(cards: list[Card], first_index: int) -> None:
    r = legal_round(cards, first_index)
    if len(r.player) < 3:
        return
    player = r.player[:2]
    expected = [AlertCode.DRAW_PLAYER_MISSING]
    banker_should = banker_cell(r.banker_two, r.player_two, None).draws  # against a Player who stood
    if banker_should and len(r.banker) == 2:
        expected.append(AlertCode.DRAW_BANKER_MISSING)
    if not banker_should and len(r.banker) == 3:
        expected.append(AlertCode.DRAW_BANKER_EXTRA)
    findings = check_play(player, r.banker, result_by_hand(player, r.banker))
    assert codes(findings) == sorted(expected)
    assert expected_draw_codes(player, r.banker) == expected
    (missing,) = [f for f in findings if f.code is AlertCode.DRAW_PLAYER_MISSING]
    assert missing.article == "Art. 9(1)"


@MUTATIONS
@given(cards=SEVEN_CARDS, first_index=FIRST_INDEX)
def test_art9_3_the_banker_third_card_removed_is_draw_banker_missing(cards: list[Card], first_index: int) -> None:
    r = legal_round(cards, first_index)
    if len(r.banker) < 3:
        return
    banker = r.banker[:2]
    findings = check_play(r.player, banker, result_by_hand(r.player, banker))
    assert codes(findings) == [AlertCode.DRAW_BANKER_MISSING]
    third = points(r.player[2]) if len(r.player) == 3 else None
    assert findings[0].article == banker_cell(r.banker_two, r.player_two, third).article
    assert findings[0].article.startswith("Art. 9(3)(")


@MUTATIONS
@given(cards=SEVEN_CARDS, first_index=FIRST_INDEX, data=st.data())
def test_art7_two_cards_swapped_between_the_hands_is_deal_order(cards: list[Card], first_index: int, data: st.DataObject) -> None:
    r = legal_round(cards, first_index)
    i = data.draw(st.integers(0, len(r.player) - 1), label="player card")
    j = data.draw(st.integers(0, len(r.banker) - 1), label="banker card")
    player, banker = list(r.player), list(r.banker)
    player[i], banker[j] = banker[j], player[i]
    findings = check_play(player, banker, result_by_hand(player, banker))
    assert codes(findings) == sorted([AlertCode.DEAL_ORDER, *expected_draw_codes(player, banker)])


@MUTATIONS
@given(cards=SEVEN_CARDS, first_index=FIRST_INDEX, to_player=st.booleans())
def test_art5_11_a_mutated_round_declared_as_before_is_also_result_mismatch(cards: list[Card], first_index: int, to_player: bool) -> None:
    """The next card added to a hand, but the table declares the round's original result:
    RESULT_MISMATCH exactly when the added card changed what the cards say."""
    r = legal_round(cards, first_index)
    player = [*r.player, r.next_card] if to_player else r.player
    banker = r.banker if to_player else [*r.banker, r.next_card]
    without_result = check_play(player, banker, result_by_hand(player, banker))
    findings = check_play(player, banker, r.coup.result)
    changed = result_by_hand(player, banker) != r.coup.result
    assert codes(findings) == sorted(codes(without_result) + [AlertCode.RESULT_MISMATCH] * changed)


@given(cards=SEVEN_CARDS, first_index=FIRST_INDEX, shift=st.integers(1, 9), hand=st.sampled_from(["player", "banker"]))
def test_art5_a_wrong_declared_total_is_result_mismatch(cards: list[Card], first_index: int, shift: int, hand: str) -> None:
    r = legal_round(cards, first_index)
    field = f"{hand}_total"
    declared = replace(r.coup.result, **{field: (getattr(r.coup.result, field) + shift) % 10})
    findings = check_play(r.player, r.banker, declared)
    assert codes(findings) == [AlertCode.RESULT_MISMATCH]
    assert findings[0].article == "Art. 5"
    assert field in findings[0].evidence["differences"]


@given(cards=SEVEN_CARDS, first_index=FIRST_INDEX, data=st.data())
def test_art11_12_a_wrong_declared_outcome_is_result_mismatch(cards: list[Card], first_index: int, data: st.DataObject) -> None:
    r = legal_round(cards, first_index)
    wrong = data.draw(st.sampled_from([o for o in Outcome if o is not r.coup.result.outcome]))
    findings = check_play(r.player, r.banker, replace(r.coup.result, outcome=wrong))
    assert codes(findings) == [AlertCode.RESULT_MISMATCH]
    assert findings[0].article == "Art. 11-12"
    assert findings[0].evidence["differences"] == {"outcome": {"declared": str(wrong), "cards_say": str(r.coup.result.outcome)}}


@given(cards=SEVEN_CARDS, first_index=FIRST_INDEX, field=st.sampled_from(["player_pair", "banker_pair"]))
def test_art13_a_wrong_declared_pair_is_result_mismatch(cards: list[Card], first_index: int, field: str) -> None:
    r = legal_round(cards, first_index)
    declared = replace(r.coup.result, **{field: not getattr(r.coup.result, field)})
    findings = check_play(r.player, r.banker, declared)
    assert codes(findings) == [AlertCode.RESULT_MISMATCH]
    assert findings[0].article == "Art. 13"
