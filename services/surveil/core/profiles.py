"""House profiles: the choices the regulator leaves to each house, kept as data and checked on load.

A profile is a TOML file in ``surveil/profiles/``; ``load_profile("sjm")`` reads one. A broken
profile raises ``InvalidProfileError`` naming the file and the field.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from importlib import resources

import msgspec

from .money import Commission, Rounding, Spot, SqueezeHolder, TieMove
from .shoe import MAX_DECKS, MIN_DECKS

DEFAULT_PROFILE = "dicj"


class BurnPolicy(StrEnum):
    """Art. 2.1: how many cards are burned when a shoe starts."""

    DECKS = "decks"  # (a) as many as there are decks
    FIRST_CARD = "first_card"  # (b) the first card, shown, plus as many as its face value
    FIXED = "fixed"  # (c) a number from 1 to 8 set by the house


class LastRound(StrEnum):
    """Art. 3.1: what happens once the cut card comes out."""

    FINISH = "finish"  # the round in progress is the last
    ONE_MORE = "one_more"  # at most one more round is played


class Burn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    policy: BurnPolicy
    count: int | None = None  # only for the fixed policy

    def __post_init__(self) -> None:
        if self.policy is BurnPolicy.FIXED:
            if self.count is None or not 1 <= self.count <= 8:
                raise ValueError("a fixed burn needs `count` from 1 to 8 (Art. 2.1(c))")
        elif self.count is not None:
            raise ValueError(f"`count` applies only to the fixed burn policy, not {self.policy}")


class HouseProfile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    description: str
    burn: Burn
    last_round: LastRound
    squeeze_allowed: bool
    squeeze_holder: SqueezeHolder  # Art. 16: who holds the cards, where squeezing is allowed
    after_tie: frozenset[TieMove]
    commission: Commission
    commission_rounding: Rounding  # Art. 18: a fraction of the commission (or of a Banker 6's half)
    side_bets: frozenset[Spot]
    # The house's usual table, used by the simulator; a live table announces its own
    # minimum and limit in each round.opened.
    decks: int
    min_bet: int
    max_bet: int

    def __post_init__(self) -> None:
        if not {TieMove.KEEP, TieMove.INCREASE} <= self.after_tie:
            raise ValueError("`after_tie` must allow keep and increase: every approved variant does (Art. 12)")
        if Spot.PLAYER in self.side_bets or Spot.BANKER in self.side_bets:
            raise ValueError("`side_bets` lists tie, player_pair and banker_pair only")
        if not MIN_DECKS <= self.decks <= MAX_DECKS:
            raise ValueError(f"`decks` must be {MIN_DECKS} to {MAX_DECKS} (Art. 1)")
        if not 0 < self.min_bet <= self.max_bet:
            raise ValueError("`min_bet` must be positive and at most `max_bet`")

    def offers(self, spot: Spot) -> bool:
        return spot in (Spot.PLAYER, Spot.BANKER) or spot in self.side_bets


class InvalidProfileError(ValueError):
    """A house profile that cannot be used, with the file and field at fault."""


def parse_profile(text: str, source: str = "<profile>") -> HouseProfile:
    try:
        return msgspec.toml.decode(text.encode(), type=HouseProfile)
    except (msgspec.ValidationError, msgspec.DecodeError) as error:
        raise InvalidProfileError(f"house profile {source}: {error}") from None


def profile_names() -> list[str]:
    folder = resources.files("surveil") / "profiles"
    return sorted(item.name.removesuffix(".toml") for item in folder.iterdir() if item.name.endswith(".toml"))


@cache
def load_profile(name: str = DEFAULT_PROFILE) -> HouseProfile:
    """The named profile shipped in ``surveil/profiles/``."""
    if name not in profile_names():  # before any path is made of it: a name may be anything an event holds
        raise InvalidProfileError(f"no house profile {name[:100]!r}; known: {', '.join(profile_names())}")
    path = resources.files("surveil") / "profiles" / f"{name}.toml"
    profile = parse_profile(path.read_text(encoding="utf-8"), f"{name}.toml")
    if profile.name != name:
        raise InvalidProfileError(f"house profile {name}.toml: `name` is {profile.name!r}, not {name!r}")
    return profile
