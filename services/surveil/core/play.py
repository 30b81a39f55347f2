"""The play of one round: dealing (Art. 7), drawing (Art. 9), the result (Art. 5, 11-13).

``deal`` plays a round correctly from the cards at the top of a shoe. ``check_play`` takes the
cards actually dealt, with their shoe indices, and the result the table declared, and returns
every way the round departs from the rules, each finding naming its alert code and article.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import msgspec

from .cards import Card
from .findings import AlertCode, Finding


class Outcome(StrEnum):
    PLAYER = "player"
    BANKER = "banker"
    TIE = "tie"


def hand_total(cards: Sequence[Card]) -> int:
    """Art. 5: the sum of the card values, modulo 10 (9 is best, "10 points" is 0)."""
    total = 0
    for card in cards:
        total += card.points
    return total % 10


def is_natural(two_card_total: int) -> bool:
    """Art. 9(2): an 8 or 9 on the first two cards (例牌) ends the round."""
    return two_card_total >= 8


class DrawRule(msgspec.Struct, frozen=True):
    """A draw decision and the clause of Art. 9 that makes it."""

    draws: bool
    article: str


def player_rule(player_two: int, banker_two: int) -> DrawRule:
    """Art. 9(1)-(2): the Player draws on 0-5 unless either hand holds a natural.

    >>> player_rule(5, 7)
    DrawRule(draws=True, article='Art. 9(1)')
    >>> player_rule(5, 8)
    DrawRule(draws=False, article='Art. 9(2)')
    """
    if player_two >= 8 or banker_two >= 8 or player_two >= 6:
        return DrawRule(False, "Art. 9(2)")
    return DrawRule(True, "Art. 9(1)")


# Art. 9(3)(2)-(5): with a Player third card, the Banker draws on these totals when the
# third card's value is in the set, and stands otherwise (Art. 9(4)(1)-(4)). 0 = 10/J/Q/K.
_BANKER_DRAWS_AGAINST: dict[int, frozenset[int]] = {
    3: frozenset({0, 1, 2, 3, 4, 5, 6, 7, 9}),
    4: frozenset({2, 3, 4, 5, 6, 7}),
    5: frozenset({4, 5, 6, 7}),
    6: frozenset({6, 7}),
}


def banker_rule(banker_two: int, player_two: int, player_third: Card | None) -> DrawRule:
    """Art. 9(3)-(4): the Banker's draw, given both two-card totals and the Player's third card.

    >>> banker_rule(3, 4, Card.parse("8S"))
    DrawRule(draws=False, article='Art. 9(4)(1)')
    >>> banker_rule(6, 7, None)
    DrawRule(draws=False, article='Art. 9(4)(4)')
    """
    if player_two >= 8:
        return DrawRule(False, "Art. 9(4)(6)")
    if banker_two >= 7:
        return DrawRule(False, "Art. 9(4)(5)")
    if player_third is None:
        if banker_two <= 5:
            return DrawRule(True, "Art. 9(3)(6)")
        return DrawRule(False, "Art. 9(4)(4)")
    if banker_two <= 2:
        return DrawRule(True, "Art. 9(3)(1)")
    clause = banker_two - 1  # totals 3, 4, 5, 6 are clauses (2)-(5) of 9(3) and (1)-(4) of 9(4)
    if player_third.points in _BANKER_DRAWS_AGAINST[banker_two]:
        return DrawRule(True, f"Art. 9(3)({clause})")
    return DrawRule(False, f"Art. 9(4)({clause - 1})")


# The same decisions as flat lookups for the hot path: [player_two][banker_two] and
# [banker_two][player_third_points], with index 10 meaning "the Player did not draw".
PLAYER_DRAWS: tuple[tuple[bool, ...], ...] = tuple(tuple(player_rule(p, b).draws for b in range(10)) for p in range(10))
_NO_THIRD = 10
BANKER_DRAWS: tuple[tuple[bool, ...], ...] = tuple(
    tuple((b <= 5) if third == _NO_THIRD else (b <= 2 or (b <= 6 and third in _BANKER_DRAWS_AGAINST[b])) for third in range(11))
    for b in range(10)
)


def _banker_draws(banker_two: int, player_two: int, player_third_points: int) -> bool:
    """``banker_rule(...).draws`` from the flat lookup; ``player_third_points`` 10: no third card."""
    return player_two < 8 and BANKER_DRAWS[banker_two][player_third_points]


class RoundResult(msgspec.Struct, frozen=True, gc=False):  # gc=False: kept with each round (core/table.py)
    """What a round's cards say: totals (Art. 5), outcome (Art. 11-12), pairs (Art. 13)."""

    player_total: int
    banker_total: int
    outcome: Outcome
    player_pair: bool
    banker_pair: bool


def outcome_of(player_total: int, banker_total: int) -> Outcome:
    """Art. 11: the higher total wins; Art. 12: equal totals are a tie."""
    if player_total > banker_total:
        return Outcome.PLAYER
    if banker_total > player_total:
        return Outcome.BANKER
    return Outcome.TIE


def is_pair(hand: Sequence[Card]) -> bool:
    """Art. 13: the hand's first two cards have the same rank (J+J is a pair, J+Q is not)."""
    return len(hand) >= 2 and hand[0].rank is hand[1].rank


def result_of(player: Sequence[Card], banker: Sequence[Card]) -> RoundResult:
    player_total = hand_total(player)
    banker_total = hand_total(banker)
    return RoundResult(
        player_total,
        banker_total,
        outcome_of(player_total, banker_total),
        is_pair(player),
        is_pair(banker),
    )


class Coup(msgspec.Struct, frozen=True):
    """A round played by the rules: the hands in the order dealt, and the result."""

    player: tuple[Card, ...]
    banker: tuple[Card, ...]
    result: RoundResult

    @property
    def cards_used(self) -> int:
        return len(self.player) + len(self.banker)


def deal(cards: Sequence[Card]) -> Coup:
    """Play a round by the rules from the top of ``cards`` (shoe order, burns already removed).

    Art. 7: one card at a time, Player first: Player, Banker, Player, Banker. Art. 9: then the
    Player's third card, if due, then the Banker's. Needs at most six cards.
    """
    player = [cards[0], cards[2]]
    banker = [cards[1], cards[3]]
    player_two = (cards[0].points + cards[2].points) % 10
    banker_two = (cards[1].points + cards[3].points) % 10
    next_card = 4
    third: int = _NO_THIRD
    if PLAYER_DRAWS[player_two][banker_two]:
        player.append(cards[next_card])
        third = cards[next_card].points
        next_card += 1
    if _banker_draws(banker_two, player_two, third):
        banker.append(cards[next_card])
    return Coup(tuple(player), tuple(banker), result_of(player, banker))


class DealtCard(msgspec.Struct, frozen=True):
    """A card as it reached a hand: its 1-based shoe index (burns included) and the card."""

    index: int
    card: Card


def check_play(player: Sequence[DealtCard], banker: Sequence[DealtCard], declared: RoundResult) -> list[Finding]:
    """Every way a dealt round departs from Art. 7, 9 and 11-13; empty when it was played right.

    Each decision is judged on what was on the table when it was taken: the Player's draw on
    the first four cards, the Banker's on those and the Player's actual third card if it was
    dealt before the Banker's. So one dealing error gives one finding instead of a cascade.
    """
    findings: list[Finding] = []
    if len(player) < 2 or len(banker) < 2:
        findings.append(
            Finding(
                AlertCode.DEAL_ORDER,
                "Art. 7",
                f"A hand was completed with fewer than two cards (Player {len(player)}, Banker {len(banker)}).",
                {"player": _codes(player), "banker": _codes(banker)},
            )
        )
        return findings + _check_result(player, banker, declared)
    order = _check_order(player, banker)
    if order:
        findings.append(order)
    player_two = (player[0].card.points + player[1].card.points) % 10
    banker_two = (banker[0].card.points + banker[1].card.points) % 10
    # The Banker goes by the Player's third card only if it left the shoe before the Banker's
    # own third card: one dealt to the Player afterwards was not on the table when it drew.
    player_third = player[2].card if len(player) >= 3 and (len(banker) < 3 or player[2].index < banker[2].index) else None
    # The flat lookups decide; the rule functions name the clause when a draw was wrong.
    drawn = len(player) - 2
    if drawn != PLAYER_DRAWS[player_two][banker_two]:
        expected = player_rule(player_two, banker_two)
        findings.append(_draw_finding("Player", player, banker, expected, drawn, player_two, banker_two))
    drawn = len(banker) - 2
    if drawn != _banker_draws(banker_two, player_two, _NO_THIRD if player_third is None else player_third.points):
        expected = banker_rule(banker_two, player_two, player_third)
        findings.append(_draw_finding("Banker", player, banker, expected, drawn, player_two, banker_two))
    return findings + _check_result(player, banker, declared)


def check_partial_deal(player: Sequence[DealtCard], banker: Sequence[DealtCard]) -> list[Finding]:
    """Art. 7 and 9 on the cards of a round stopped before its end (voided, Art. 10): the cards
    dealt so far went P, B, P, B, and no hand drew where it had to stand. A draw still missing is
    not judged, nor the result: the round stopped."""
    if len(player) >= 2 and len(banker) >= 2:
        played = result_of([c.card for c in player], [c.card for c in banker])
        return [f for f in check_play(player, banker, played) if f.code not in _MISSING_DRAWS]
    dealt = sorted([(c.index, "P") for c in player] + [(c.index, "B") for c in banker])
    seen = "".join(hand for _, hand in dealt)
    expected = "PBPB"[: len(seen)]
    if seen == expected:
        return []
    return [
        Finding(
            AlertCode.DEAL_ORDER,
            "Art. 7",
            f"Cards left the shoe in the order {seen} instead of {expected}.",
            {**_hands_evidence(player, banker), "expected_order": expected, "seen_order": seen},
        )
    ]


_MISSING_DRAWS = frozenset({AlertCode.DRAW_PLAYER_MISSING, AlertCode.DRAW_BANKER_MISSING})


def _codes(hand: Sequence[DealtCard]) -> list[str]:
    return [dealt.card.code for dealt in hand]


def _hands_evidence(player: Sequence[DealtCard], banker: Sequence[DealtCard]) -> dict[str, Any]:
    return {
        "player": _codes(player),
        "player_indices": [dealt.index for dealt in player],
        "banker": _codes(banker),
        "banker_indices": [dealt.index for dealt in banker],
    }


def _check_order(player: Sequence[DealtCard], banker: Sequence[DealtCard]) -> Finding | None:
    """Art. 7: P, B, P, B by shoe index, then the Player's third card, then the Banker's."""
    # Dealt right, the shoe indices rise in that order: the usual case needs no more. One index
    # twice is a card used twice (CARD_REUSED, judged with the shoe), not an order broken.
    previous = 0
    for dealt_card in (player[0], banker[0], player[1], banker[1], *player[2:], *banker[2:]):
        if dealt_card.index < previous:
            break
        previous = dealt_card.index
    else:
        return None
    expected = "PBPB" + "P" * (len(player) - 2) + "B" * (len(banker) - 2)
    dealt = sorted([(c.index, "P") for c in player] + [(c.index, "B") for c in banker])
    seen = "".join(hand for _, hand in dealt)
    summary = (
        f"Cards left the shoe in the order {seen} instead of {expected}."
        if seen != expected
        else "A hand holds its cards out of the order they left the shoe."
    )
    return Finding(
        AlertCode.DEAL_ORDER,
        "Art. 7",
        summary,
        {**_hands_evidence(player, banker), "expected_order": expected, "seen_order": seen},
    )


def _draw_finding(
    hand: str,
    player: Sequence[DealtCard],
    banker: Sequence[DealtCard],
    rule: DrawRule,
    drawn: int,
    player_two: int,
    banker_two: int,
) -> Finding:
    evidence = {
        **_hands_evidence(player, banker),
        "player_two_card_total": player_two,
        "banker_two_card_total": banker_two,
        "expected_draws": int(rule.draws),
        "seen_draws": drawn,
        "rule": rule.article,
    }
    two = player_two if hand == "Player" else banker_two
    if drawn < int(rule.draws):
        code = AlertCode.DRAW_PLAYER_MISSING if hand == "Player" else AlertCode.DRAW_BANKER_MISSING
        summary = f"{hand} stood on {two} but had to draw a third card ({rule.article})."
        return Finding(code, rule.article, summary, evidence)
    code = AlertCode.DRAW_PLAYER_EXTRA if hand == "Player" else AlertCode.DRAW_BANKER_EXTRA
    if drawn > 1:
        summary = f"{hand} drew {drawn} extra cards; a hand draws at most one (Art. 9)."
        return Finding(code, "Art. 9", summary, evidence)
    summary = f"{hand} drew a third card on {two} but had to stand ({rule.article})."
    return Finding(code, rule.article, summary, evidence)


def _check_result(player: Sequence[DealtCard], banker: Sequence[DealtCard], declared: RoundResult) -> list[Finding]:
    """Art. 5, 11-13: the declared totals, outcome and pairs must be what the cards say."""
    actual = result_of([c.card for c in player], [c.card for c in banker])
    if actual == declared:
        return []
    differences = {
        name: {"declared": _plain(getattr(declared, name)), "cards_say": _plain(getattr(actual, name))}
        for name in RoundResult.__struct_fields__
        if getattr(declared, name) != getattr(actual, name)
    }
    article = _result_article(differences)
    summary = (
        "Declared "
        + ", ".join(f"{name.replace('_', ' ')} {d['declared']} but the cards say {d['cards_say']}" for name, d in differences.items())
        + "."
    )
    return [
        Finding(
            AlertCode.RESULT_MISMATCH,
            article,
            summary,
            {**_hands_evidence(player, banker), "differences": differences},
        )
    ]


def _result_article(differences: dict[str, Any]) -> str:
    if "player_total" in differences or "banker_total" in differences:
        return "Art. 5"
    if "outcome" in differences:
        return "Art. 11-12"
    return "Art. 13"


def _plain(value: object) -> object:
    return str(value) if isinstance(value, StrEnum) else value
