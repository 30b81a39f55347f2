"""House profiles (docs/contract.md, "House profiles"): the shipped ones load; broken ones name the field."""

from __future__ import annotations

from importlib import resources

import pytest

from surveil.core.money import Commission, Rounding, Spot, SqueezeHolder, TieMove
from surveil.core.profiles import (
    DEFAULT_PROFILE,
    Burn,
    BurnPolicy,
    HouseProfile,
    InvalidProfileError,
    LastRound,
    load_profile,
    parse_profile,
    profile_names,
)

ALL_TIE_MOVES = frozenset(TieMove)
SIDE_BETS = frozenset({Spot.TIE, Spot.PLAYER_PAIR, Spot.BANKER_PAIR})

GOOD = """
name = "test"
description = "a valid profile to break one field at a time"
burn = { policy = "decks" }
last_round = "finish"
squeeze_allowed = true
squeeze_holder = "largest_total"
after_tie = ["withdraw", "keep", "increase", "reduce", "move"]
commission = "five_percent"
commission_rounding = "down"
side_bets = ["tie", "player_pair", "banker_pair"]
decks = 8
min_bet = 500
max_bet = 200000
"""


def broken(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new, 1)


def test_the_three_shipped_profiles_are_listed() -> None:
    assert {"dicj", "sjm", "no-commission"} <= set(profile_names())
    assert DEFAULT_PROFILE == "dicj"


def test_dicj_profile() -> None:
    profile = load_profile("dicj")
    assert profile == load_profile()
    assert profile.burn == Burn(BurnPolicy.DECKS)
    assert profile.last_round is LastRound.FINISH
    assert profile.after_tie == ALL_TIE_MOVES  # Art. 12 (1)-(3)
    assert profile.commission is Commission.FIVE_PERCENT
    assert profile.squeeze_allowed is True
    assert profile.side_bets == SIDE_BETS
    assert (profile.decks, profile.min_bet, profile.max_bet) == (8, 500, 200_000)


def test_sjm_profile_allows_only_keep_and_increase_after_a_tie() -> None:
    profile = load_profile("sjm")
    assert profile.after_tie == {TieMove.KEEP, TieMove.INCREASE}
    assert profile.burn == Burn(BurnPolicy.FIRST_CARD)
    assert profile.last_round is LastRound.ONE_MORE
    assert profile.commission is Commission.FIVE_PERCENT


def test_no_commission_profile() -> None:
    profile = load_profile("no-commission")
    assert profile.commission is Commission.NO_COMMISSION
    assert profile.burn == Burn(BurnPolicy.FIXED, 3)
    assert profile.squeeze_allowed is False
    assert profile.after_tie == ALL_TIE_MOVES


@pytest.mark.parametrize("name", ["dicj", "sjm", "no-commission"])
def test_every_shipped_profile_offers_player_banker_and_its_side_bets(name: str) -> None:
    profile = load_profile(name)
    assert profile.name == name
    assert all(profile.offers(spot) for spot in (Spot.PLAYER, Spot.BANKER, *profile.side_bets))
    assert profile.min_bet % 20 == 0 or profile.commission is Commission.NO_COMMISSION  # commission never rounds


@pytest.mark.parametrize("name", ["dicj", "sjm", "no-commission"])
def test_every_shipped_profile_states_its_rounding_and_its_squeeze_holder(name: str) -> None:
    """docs/rules.md: the DICJ reading rounds the commission down (the house never takes more than
    5%) and lets the seated bettor with the largest stake in the round hold the cards."""
    text = (resources.files("surveil") / "profiles" / f"{name}.toml").read_text(encoding="utf-8")
    assert "\ncommission_rounding = " in text and "\nsqueeze_holder = " in text  # stated, not defaulted
    profile = load_profile(name)
    assert (profile.commission_rounding, profile.squeeze_holder) == (Rounding.DOWN, SqueezeHolder.LARGEST_TOTAL)


@pytest.mark.parametrize("rounding", list(Rounding))
@pytest.mark.parametrize("holder", list(SqueezeHolder))
def test_a_profile_may_choose_any_rounding_and_squeeze_holder(rounding: Rounding, holder: SqueezeHolder) -> None:
    text = broken('commission_rounding = "down"', f'commission_rounding = "{rounding}"')
    profile = parse_profile(text.replace('squeeze_holder = "largest_total"', f'squeeze_holder = "{holder}"'))
    assert (profile.commission_rounding, profile.squeeze_holder) == (rounding, holder)


def test_a_valid_profile_parses() -> None:
    assert isinstance(parse_profile(GOOD), HouseProfile)


def test_a_profile_without_side_bets_offers_none() -> None:
    profile = parse_profile(broken('side_bets = ["tie", "player_pair", "banker_pair"]', "side_bets = []"))
    assert not any(profile.offers(spot) for spot in SIDE_BETS)
    assert profile.offers(Spot.BANKER)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('burn = { policy = "decks" }', 'burn = { policy = "fixed", count = 9 }', r"`count` from 1 to 8.*\$\.burn"),
        ('burn = { policy = "decks" }', 'burn = { policy = "fixed", count = 0 }', r"`count` from 1 to 8.*\$\.burn"),
        ('burn = { policy = "decks" }', 'burn = { policy = "fixed" }', r"`count` from 1 to 8.*\$\.burn"),
        ('burn = { policy = "decks" }', 'burn = { policy = "decks", count = 3 }', r"`count` applies only to the fixed.*\$\.burn"),
        ('burn = { policy = "decks" }', 'burn = { policy = "shuffle" }', r"\$\.burn\.policy"),
        ("decks = 8", "decks = 8\nsurcharge = 1", "unknown field `surcharge`"),
        ("decks = 8\n", "", "missing required field `decks`"),
        ("min_bet = 500\n", "", "missing required field `min_bet`"),
        ('"withdraw", "keep", ', '"withdraw", ', "`after_tie` must allow keep"),
        ('"increase", "reduce", "move"', '"reduce", "move"', "`after_tie` must allow keep and increase"),
        ('"move"]', '"hedge"]', r"\$\.after_tie"),
        ("decks = 8", "decks = 5", r"`decks` must be 6 to 12 \(Art. 1\)"),
        ("decks = 8", "decks = 13", r"`decks` must be 6 to 12"),
        ("min_bet = 500", "min_bet = 500000", "`min_bet` must be positive and at most `max_bet`"),
        ("min_bet = 500", "min_bet = 0", "`min_bet` must be positive"),
        ('"tie", "player_pair"', '"banker", "player_pair"', "`side_bets` lists tie, player_pair and banker_pair only"),
        ('last_round = "finish"', 'last_round = "never"', r"\$\.last_round"),
        ('commission = "five_percent"', 'commission = "ten_percent"', r"\$\.commission"),
        ("squeeze_allowed = true", 'squeeze_allowed = "yes"', r"\$\.squeeze_allowed"),
        ('commission_rounding = "down"', 'commission_rounding = "bankers"', r"\$\.commission_rounding"),
        ('commission_rounding = "down"\n', "", "missing required field `commission_rounding`"),
        ('squeeze_holder = "largest_total"', 'squeeze_holder = "eldest"', r"\$\.squeeze_holder"),
        ('squeeze_holder = "largest_total"\n', "", "missing required field `squeeze_holder`"),
    ],
)
def test_a_broken_profile_names_the_field(old: str, new: str, message: str) -> None:
    with pytest.raises(InvalidProfileError, match=message) as error:
        parse_profile(broken(old, new), "house.toml")
    assert "house profile house.toml" in str(error.value)


def test_a_profile_that_is_not_toml() -> None:
    with pytest.raises(InvalidProfileError, match="house profile bad.toml"):
        parse_profile("name = ", "bad.toml")


def test_an_unknown_profile_name_lists_the_known_ones() -> None:
    with pytest.raises(InvalidProfileError, match=r"no house profile 'galaxy'; known: .*dicj.*sjm"):
        load_profile("galaxy")


def test_the_shipped_files_say_their_own_name() -> None:
    folder = resources.files("surveil") / "profiles"
    for name in profile_names():
        text = (folder / f"{name}.toml").read_text(encoding="utf-8")
        assert parse_profile(text, name).name == name
