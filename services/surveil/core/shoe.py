"""The shoe: 6 to 12 decks (Art. 1), shuffled, and what is left of it as cards come out."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

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
class ShoeComposition:
    """How many of each card a shoe still holds, and which cards came out more often than it held.

    >>> shoe = ShoeComposition(decks=6)
    >>> shoe.remaining(Card.parse("AS"))
    6
    >>> [shoe.take(Card.parse("AS")) for _ in range(7)][-1]  # the seventh ace of spades is foreign
    False
    """

    decks: int
    seen: Counter[Card]

    def __init__(self, decks: int) -> None:
        self.decks = check_decks(decks)
        self.seen = Counter()

    @property
    def size(self) -> int:
        return self.decks * CARDS_PER_DECK

    @property
    def cards_out(self) -> int:
        return self.seen.total()

    def remaining(self, card: Card) -> int:
        """Copies of ``card`` still in the shoe (never negative)."""
        return max(self.decks - self.seen[card], 0)

    def take(self, card: Card) -> bool:
        """Record ``card`` leaving the shoe; False when the shoe never held that many copies."""
        self.seen[card] += 1
        return self.seen[card] <= self.decks
