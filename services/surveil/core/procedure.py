"""Shoe procedure: the cut card and burn at a shoe's start (Art. 2), demonstration rounds (Art. 2.2),
the last round after the cut card (Art. 3). With an automatic shuffling-dealing machine there is
no cut card and no burn (Art. 2.3): callers skip those checks for automatic shoes.
"""

from __future__ import annotations

from collections.abc import Sequence

from .cards import Card
from .findings import AlertCode, Finding
from .profiles import Burn, BurnPolicy, LastRound
from .shoe import CARDS_PER_DECK

CUT_CARD_MIN_BEHIND = 12  # Art. 2.1: the cut card goes in at least about 12 cards from the end
DEMO_ROUNDS_MAX = 3  # Art. 2.2


def burn_due(burn: Burn, decks: int, first_card: Card | None) -> int:
    """Art. 2.1: how many cards the burn at a shoe's start takes out.

    >>> from surveil.core.profiles import Burn, BurnPolicy
    >>> burn_due(Burn(BurnPolicy.FIRST_CARD), 8, Card.parse("7D"))  # the 7 itself, then 7 more
    8
    >>> burn_due(Burn(BurnPolicy.FIRST_CARD), 8, Card.parse("KD"))  # a K counts 10 here
    11
    """
    if burn.policy is BurnPolicy.DECKS:
        return decks
    if burn.policy is BurnPolicy.FIXED:
        assert burn.count is not None  # the profile checks this on load
        return burn.count
    return 1 + first_card.rank.face_value if first_card else 1


def check_burn(burn: Burn, decks: int, burned: Sequence[Card]) -> Finding | None:
    """Art. 2.1: the burn at a shoe's start follows the house's burn policy."""
    due = burn_due(burn, decks, burned[0] if burned else None)
    if len(burned) == due:
        return None
    rule = {
        BurnPolicy.DECKS: f"one card per deck ({decks})",
        BurnPolicy.FIXED: f"the house's fixed {burn.count}",
        BurnPolicy.FIRST_CARD: "the first card plus its face value",
    }[burn.policy]
    return Finding(
        AlertCode.BURN_COUNT,
        "Art. 2.1",
        f"{len(burned)} cards were burned at the start of the shoe; the house burns {rule}, so {due}.",
        {"burned": [card.code for card in burned], "expected_count": due, "seen_count": len(burned), "policy": str(burn.policy)},
    )


def check_cut_card(decks: int, cards_before: int) -> Finding | None:
    """Art. 2.1: at least about 12 cards must lie behind the cut card."""
    behind = decks * CARDS_PER_DECK - cards_before
    if behind >= CUT_CARD_MIN_BEHIND:
        return None
    return Finding(
        AlertCode.CUT_CARD_DEPTH,
        "Art. 2.1",
        f"The cut card had only {behind} cards behind it; it must go in at least {CUT_CARD_MIN_BEHIND} from the end.",
        {"cards_before": cards_before, "cards_behind": behind, "minimum_behind": CUT_CARD_MIN_BEHIND, "decks": decks},
    )


def check_cut_card_seen(decks: int, cards_out: int, cut_seen: bool) -> Finding | None:
    """Art. 2.1 and 3: a shoe dealt past the last place the cut card may lie (at least about 12
    cards from the end) must have shown it; a shoe changed before that place (Art. 3.2) need not."""
    last_place = decks * CARDS_PER_DECK - CUT_CARD_MIN_BEHIND
    if cut_seen or cards_out <= last_place:
        return None
    return Finding(
        AlertCode.CUT_CARD_MISSING,
        "Art. 2.1, 3",
        f"{cards_out} cards left the shoe and the cut card never came out; it lies at least {CUT_CARD_MIN_BEHIND} "
        f"cards from the end, so it should have come out by card {last_place}: the shoe was dealt without its "
        "last-round signal (Art. 3).",
        {"cards_out": cards_out, "last_cut_card_place": last_place, "minimum_behind": CUT_CARD_MIN_BEHIND, "decks": decks},
    )


def rounds_allowed_after_cut(policy: LastRound, round_in_progress: bool) -> int:
    """Art. 3.1: rounds that may still open once the cut card is out.

    If no round was in progress, the next one is the round the cut card belongs to.
    """
    return (0 if round_in_progress else 1) + (1 if policy is LastRound.ONE_MORE else 0)


def check_round_after_cut(policy: LastRound, opened_after_cut: int, allowed: int, round_no: int) -> Finding | None:
    if opened_after_cut <= allowed:
        return None
    return Finding(
        AlertCode.ROUNDS_AFTER_CUT_CARD,
        "Art. 3.1",
        f"Round {round_no} was opened after the cut card came out; the house plays "
        f"{'one more round' if policy is LastRound.ONE_MORE else 'only the round in progress'}.",
        {"round_no": round_no, "rounds_after_cut": opened_after_cut, "allowed": allowed, "policy": str(policy)},
    )


def check_demo_round(demo_rounds: int, bets: int, real_rounds: int = 0) -> list[Finding]:
    """Art. 2.2: at most 3 demonstration rounds per shoe, at its start (before any real round),
    and none takes bets.

    ``demo_rounds`` counts this one; ``bets`` is how many bets it has seen; ``real_rounds`` how
    many real rounds of the shoe opened before it.
    """
    findings = []
    if real_rounds:
        findings.append(
            Finding(
                AlertCode.DEMO_ROUNDS,
                "Art. 2.2",
                f"A demonstration round opened after {real_rounds} real round(s) of this shoe; "
                "demonstration rounds are played only at the start of a shoe.",
                {"demo_rounds": demo_rounds, "real_rounds_before": real_rounds},
            )
        )
    if demo_rounds > DEMO_ROUNDS_MAX:
        findings.append(
            Finding(
                AlertCode.DEMO_ROUNDS,
                "Art. 2.2",
                f"Demonstration round {demo_rounds} in this shoe; at most {DEMO_ROUNDS_MAX} are allowed.",
                {"demo_rounds": demo_rounds, "maximum": DEMO_ROUNDS_MAX},
            )
        )
    if bets:
        findings.append(
            Finding(
                AlertCode.DEMO_ROUNDS,
                "Art. 2.2",
                f"A demonstration round took {bets} bet(s); demonstration rounds take no bets.",
                {"bets": bets},
            )
        )
    return findings
