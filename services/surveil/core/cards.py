"""Cards as the event contract writes them (``"10H"``, ``"QS"``) and their values (Art. 5)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Rank(StrEnum):
    """A card's rank, spelled as in the event contract."""

    ACE = "A"
    TWO = "2"
    THREE = "3"
    FOUR = "4"
    FIVE = "5"
    SIX = "6"
    SEVEN = "7"
    EIGHT = "8"
    NINE = "9"
    TEN = "10"
    JACK = "J"
    QUEEN = "Q"
    KING = "K"

    @property
    def points(self) -> int:
        """Art. 5: 10, J, Q, K count 0; A counts 1; 2-9 their face value.

        >>> Rank.KING.points, Rank.ACE.points, Rank.SEVEN.points
        (0, 1, 7)
        """
        return _RANK_POINTS[self]

    @property
    def face_value(self) -> int:
        """The count used by the first-card burn policy (Art. 2.1(b)): 10, J, Q, K count 10."""
        return _RANK_POINTS[self] or 10


class Suit(StrEnum):
    """A card's suit, spelled as in the event contract."""

    SPADES = "S"
    HEARTS = "H"
    DIAMONDS = "D"
    CLUBS = "C"


_RANK_POINTS = {rank: (min(index + 1, 10) % 10) for index, rank in enumerate(Rank)}


class InvalidCardError(ValueError):
    """A card code that is not rank + suit as in the event contract."""


@dataclass(frozen=True, slots=True)
class Card:
    """One card. ``Card.parse("10H").code == "10H"``; ``points`` is its baccarat value (Art. 5)."""

    rank: Rank
    suit: Suit
    # Art. 5, looked up once per card: the checks read it for every card of every round.
    points: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", _RANK_POINTS[self.rank])

    @property
    def code(self) -> str:
        # Rank and suit are str enums: + joins their values, ten times faster than an f-string
        # (which formats each through Enum.__format__); the checks ask for every card dealt.
        return self.rank + self.suit

    def __str__(self) -> str:
        return self.code

    @staticmethod
    def parse(code: str) -> Card:
        """The card a contract code names.

        >>> Card.parse("QS")
        Card(rank=<Rank.QUEEN: 'Q'>, suit=<Suit.SPADES: 'S'>)
        >>> Card.parse("1H")
        Traceback (most recent call last):
        ...
        surveil.core.cards.InvalidCardError: '1H' is not a card: expected rank (A 2-10 J Q K) + suit (S H D C)
        """
        try:
            return CARDS[code]
        except (KeyError, TypeError):
            raise InvalidCardError(f"{code!r} is not a card: expected rank (A 2-10 J Q K) + suit (S H D C)") from None


# Every card of one deck, in rank-major order; parsing is a dictionary lookup.
DECK: tuple[Card, ...] = tuple(Card(rank, suit) for rank in Rank for suit in Suit)
CARDS: dict[str, Card] = {card.code: card for card in DECK}
CARD_POINTS: dict[str, int] = {card.code: card.points for card in DECK}
