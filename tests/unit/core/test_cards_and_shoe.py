"""Cards (event contract codes, Art. 5 values, Art. 13 pairs) and the shoe (Art. 1)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from surveil.core.cards import CARD_POINTS, DECK, Card, InvalidCardError, Rank, Suit
from surveil.core.play import Outcome, hand_total, is_natural, is_pair, outcome_of
from surveil.core.shoe import InvalidShoeError, ShoeComposition, check_decks, shuffled_shoe

# docs/contract.md: a card is rank + suit, ranks A 2 3 4 5 6 7 8 9 10 J Q K, suits S H D C.
CONTRACT_RANKS = "A 2 3 4 5 6 7 8 9 10 J Q K".split()
CONTRACT_SUITS = "S H D C".split()
# docs/rules.md, Art. 5, written out.
ART5 = {"A": 1, "2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8, "9": 9, "10": 0, "J": 0, "Q": 0, "K": 0}


def cards(*codes: str) -> list[Card]:
    return [Card.parse(code) for code in codes]


@pytest.mark.parametrize("rank", CONTRACT_RANKS)
@pytest.mark.parametrize("suit", CONTRACT_SUITS)
def test_contract_every_card_code_parses_and_round_trips(rank: str, suit: str) -> None:
    card = Card.parse(rank + suit)
    assert (card.rank.value, card.suit.value) == (rank, suit)
    assert card.code == str(card) == rank + suit


def test_contract_a_deck_is_the_52_codes() -> None:
    assert sorted(card.code for card in DECK) == sorted(r + s for r in CONTRACT_RANKS for s in CONTRACT_SUITS)
    assert len(set(DECK)) == 52


@pytest.mark.parametrize(
    "code",
    ["1H", "11S", "AX", "", "as", "qs", "10", "H10", " AS", "AS ", "0S", "T H", "TS", "AAS", "10HH", "🂡"],
)
def test_contract_bad_card_codes_raise_invalid_card_error(code: str) -> None:
    with pytest.raises(InvalidCardError, match="is not a card"):
        Card.parse(code)


@pytest.mark.parametrize("value", [None, 10, ["AS"], b"AS"])
def test_contract_non_strings_are_not_cards(value: object) -> None:
    with pytest.raises(InvalidCardError):
        Card.parse(value)  # type: ignore[arg-type]


def test_invalid_card_error_is_a_value_error() -> None:
    assert issubclass(InvalidCardError, ValueError)


@pytest.mark.parametrize("rank", CONTRACT_RANKS)
def test_art5_card_values(rank: str) -> None:
    for suit in CONTRACT_SUITS:
        card = Card.parse(rank + suit)
        assert card.points == card.rank.points == CARD_POINTS[card.code] == ART5[rank]


def test_art2_1_b_face_value_counts_10_j_q_k_as_10() -> None:
    """Art. 2.1(b): the first-card burn counts 10, J, Q, K as 10 (not their Art. 5 value 0)."""
    assert {rank.value: rank.face_value for rank in Rank} == {**ART5, "10": 10, "J": 10, "Q": 10, "K": 10}


@pytest.mark.parametrize(
    ("codes", "total"),
    [
        (["5S", "5H"], 0),  # "10 points" is 0
        (["9S", "9H"], 8),
        (["KS", "QH"], 0),
        (["AS", "KH", "9D"], 0),
        (["7S", "8H", "9D"], 4),
        (["4S", "3H"], 7),
        (["10S", "9H"], 9),  # 9 is the best total
    ],
)
def test_art5_a_hand_total_is_the_sum_modulo_10(codes: list[str], total: int) -> None:
    assert hand_total(cards(*codes)) == total


def test_art9_2_naturals_are_8_and_9() -> None:
    assert [t for t in range(10) if is_natural(t)] == [8, 9]


@pytest.mark.parametrize(
    ("codes", "pair"),
    [
        (["JS", "JH"], True),  # J+J is a pair
        (["JS", "QS"], False),  # J+Q is not, though both count 0
        (["10S", "KS"], False),
        (["10D", "10C"], True),
        (["AS", "AS"], True),  # same suit too (8 decks)
        (["7H", "7D", "2C"], True),  # the third card does not matter
        (["7H", "2D", "7C"], False),  # only the first two cards
        (["8S", "8H"], True),
    ],
)
def test_art13_a_pair_is_the_first_two_cards_of_the_same_rank(codes: list[str], pair: bool) -> None:
    assert is_pair(cards(*codes)) is pair


@pytest.mark.parametrize(
    ("player", "banker", "outcome"),
    [(7, 6, Outcome.PLAYER), (0, 9, Outcome.BANKER), (5, 5, Outcome.TIE), (0, 0, Outcome.TIE), (9, 8, Outcome.PLAYER)],
)
def test_art11_12_the_higher_total_wins_equal_totals_tie(player: int, banker: int, outcome: Outcome) -> None:
    assert outcome_of(player, banker) is outcome


# ---- the shoe (Art. 1) ------------------------------------------------------------------


@pytest.mark.parametrize("decks", range(6, 13))
def test_art1_a_shoe_holds_6_to_12_decks(decks: int) -> None:
    assert check_decks(decks) == decks


@pytest.mark.parametrize("decks", [0, 1, 5, 13, 52, -8])
def test_art1_other_deck_counts_are_refused(decks: int) -> None:
    with pytest.raises(InvalidShoeError, match=r"6 to 12 decks \(Art. 1\)"):
        check_decks(decks)
    with pytest.raises(InvalidShoeError):
        ShoeComposition(decks)
    with pytest.raises(InvalidShoeError):
        shuffled_shoe(decks, random.Random(0))


def test_art1_a_shuffled_shoe_holds_every_card_once_per_deck() -> None:
    shoe = shuffled_shoe(8, random.Random(7))
    assert len(shoe) == 416
    assert Counter(shoe) == Counter({card: 8 for card in DECK})


def test_a_seeded_shuffle_is_repeatable_and_seeds_differ() -> None:
    assert shuffled_shoe(6, random.Random(1)) == shuffled_shoe(6, random.Random(1))
    assert shuffled_shoe(6, random.Random(1)) != shuffled_shoe(6, random.Random(2))


def test_shoe_composition_counts_what_is_left() -> None:
    shoe = ShoeComposition(decks=8)
    assert shoe.size == 416
    ace = Card.parse("AS")
    assert shoe.remaining(ace) == 8
    assert shoe.take(ace) is True
    assert shoe.remaining(ace) == 7
    assert shoe.remaining(Card.parse("AH")) == 8
    assert shoe.cards_out == 1


def test_card_overcount_when_a_card_comes_out_more_often_than_the_decks_hold() -> None:
    """CARD_OVERCOUNT evidence: the 7th ace of spades in a 6-deck shoe is a foreign card."""
    shoe = ShoeComposition(decks=6)
    ace = Card.parse("AS")
    assert [shoe.take(ace) for _ in range(7)] == [True] * 6 + [False]
    assert shoe.remaining(ace) == 0  # never negative
    assert shoe.cards_out == 7


def test_a_whole_shoe_taken_has_no_overcount_and_nothing_left() -> None:
    shoe = ShoeComposition(decks=6)
    assert all(shoe.take(card) for card in shuffled_shoe(6, random.Random(3)))
    assert shoe.cards_out == shoe.size
    assert all(shoe.remaining(card) == 0 for card in DECK)
    assert shoe.take(Card.parse("KD")) is False


def test_suits_and_ranks_are_the_contract_spelling() -> None:
    assert [r.value for r in Rank] == CONTRACT_RANKS
    assert [s.value for s in Suit] == CONTRACT_SUITS


def test_shoe_composition_takes_contract_codes_too() -> None:
    shoe = ShoeComposition(decks=6)
    assert [shoe.take("QH") for _ in range(7)] == [True] * 6 + [False]
    assert shoe.remaining(Card.parse("QH")) == 0
