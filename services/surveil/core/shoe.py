"""The shoe: 6 to 12 decks (Art. 1), shuffled, and what is left of it as cards come out."""

from __future__ import annotations

import random
from dataclasses import dataclass

import msgspec

from .cards import DECK, Card

MIN_DECKS = 6
MAX_DECKS = 12
CARDS_PER_DECK = 52


class InvalidShoeError(ValueError):
    """A shoe that Art. 1 does not allow."""


def check_decks(decks: int) -> int:
    """Art. 1: a shoe holds 6 to 12 decks of 52 cards."""
    if not MIN_DECKS <= decks <= MAX_DECKS:
        raise InvalidShoeError(f"a shoe holds {MIN_DECKS} to {MAX_DECKS} decks (Art. 1), not {decks}")
    return decks


def shuffled_shoe(decks: int, rng: random.Random) -> list[Card]:
    """``decks`` full decks in an order drawn from ``rng`` (seed it for a repeatable shoe)."""
    cards = list(DECK) * check_decks(decks)
    rng.shuffle(cards)
    return cards


@dataclass(slots=True)
class DealingShoe:
    """A shoe as the dealer deals from it: the shuffled cards in order, how many lie before the
    cut card (Art. 2.1), and how many are out."""

    shoe_id: str
    cards: list[Card]
    cut: int  # cards before the cut card
    pos: int = 0  # cards out
    cut_out: bool = False

    @property
    def remaining(self) -> int:
        return len(self.cards) - self.pos


class ShoeComposition(msgspec.Struct, gc=False):  # gc=False: part of a table's state, as core/table.py's
    """How many of each card came out of a shoe, and whether more came out than it held (Art. 1).

    A plain struct of card codes and counts, so a watch over a live table can store it.

    >>> shoe = ShoeComposition(decks=6)
    >>> shoe.remaining("AS")
    6
    >>> [shoe.take("AS") for _ in range(7)][-1]  # the seventh ace of spades is foreign
    False
    """

    decks: int
    seen: dict[str, int] = {}

    def __post_init__(self) -> None:
        check_decks(self.decks)

    @property
    def size(self) -> int:
        return self.decks * CARDS_PER_DECK

    @property
    def cards_out(self) -> int:
        return sum(self.seen.values())

    def copies_seen(self, card: Card | str) -> int:
        return self.seen.get(card if isinstance(card, str) else card.code, 0)

    def remaining(self, card: Card | str) -> int:
        """Copies of ``card`` still in the shoe (never negative)."""
        return max(self.decks - self.copies_seen(card), 0)

    def take(self, card: Card | str) -> bool:
        """Record ``card`` (a card or its contract code) leaving the shoe; False when the shoe
        never held that many copies."""
        code = card if isinstance(card, str) else card.code
        count = self.seen.get(code, 0) + 1
        self.seen[code] = count
        return count <= self.decks
