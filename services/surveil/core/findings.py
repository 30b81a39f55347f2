"""What the checks find: each finding names its alert code (docs/contract.md) and the article it enforces."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class AlertCode(StrEnum):
    """The alert codes of the event contract (docs/contract.md). Codes are never renamed; new ones may be added."""

    # Rounds and cards (Art. 2-11)
    DRAW_PLAYER_MISSING = "DRAW_PLAYER_MISSING"
    DRAW_PLAYER_EXTRA = "DRAW_PLAYER_EXTRA"
    DRAW_BANKER_MISSING = "DRAW_BANKER_MISSING"
    DRAW_BANKER_EXTRA = "DRAW_BANKER_EXTRA"
    DEAL_ORDER = "DEAL_ORDER"
    RESULT_MISMATCH = "RESULT_MISMATCH"
    CARD_MISMATCH = "CARD_MISMATCH"
    CARD_UNACCOUNTED = "CARD_UNACCOUNTED"
    CARD_OVERCOUNT = "CARD_OVERCOUNT"
    CARD_EXPOSED = "CARD_EXPOSED"
    BURN_COUNT = "BURN_COUNT"
    CUT_CARD_DEPTH = "CUT_CARD_DEPTH"
    ROUNDS_AFTER_CUT_CARD = "ROUNDS_AFTER_CUT_CARD"
    DEMO_ROUNDS = "DEMO_ROUNDS"
    # Bets (Art. 12-16 and house rules)
    TIE_BET_WITHDRAWN = "TIE_BET_WITHDRAWN"
    TIE_BET_REDUCED = "TIE_BET_REDUCED"
    TIE_BET_MOVED = "TIE_BET_MOVED"
    LATE_BET = "LATE_BET"
    BANKER_BET_MULTIPLE = "BANKER_BET_MULTIPLE"
    BET_BELOW_MINIMUM = "BET_BELOW_MINIMUM"
    TABLE_LIMIT = "TABLE_LIMIT"
    SQUEEZE_HOLDER = "SQUEEZE_HOLDER"
    # Money (Art. 17-18)
    PAYOUT_MISMATCH = "PAYOUT_MISMATCH"
    UNSETTLED_BET = "UNSETTLED_BET"
    DUPLICATE_SETTLEMENT = "DUPLICATE_SETTLEMENT"
    # Patterns (statistics over many rounds)
    OUTCOME_DRIFT = "OUTCOME_DRIFT"
    PATRON_WIN_RATE = "PATRON_WIN_RATE"
    DEALER_ERROR_RATE = "DEALER_ERROR_RATE"
    SHOE_REPEAT = "SHOE_REPEAT"
    # Devices (added in v1.1): a shoe line or console input without its device's signature
    DEVICE_SIGNATURE = "DEVICE_SIGNATURE"
    # Added in v1.2
    ROUND_VOIDED = "ROUND_VOIDED"  # Art. 4, 10: every voided round; its severity depends on the round
    CARD_REUSED = "CARD_REUSED"  # Art. 2, 8: a shoe index in two hands, two rounds, or burned then dealt
    BURN_MID_ROUND = "BURN_MID_ROUND"  # Art. 8: a burn after the round's first card
    CUT_CARD_MISSING = "CUT_CARD_MISSING"  # Art. 2.1, 3: a manual shoe dealt past the cut card's place without it
    STANDING_BET_ON_SEAT_BOX = "STANDING_BET_ON_SEAT_BOX"  # Art. 15: a standing bettor's chips in a seat's box


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


# How urgent each code is for the surveillance room. Errors that move money or point to
# cheating are critical; procedure slips are warnings; Art. 4 exposures are only recorded.
# ROUND_VOIDED is graded by its finding: critical (its default here) for a void nothing in the
# round called for, a warning for one Art. 10 allows.
SEVERITY: dict[AlertCode, Severity] = {
    **{code: Severity.CRITICAL for code in AlertCode},
    AlertCode.CARD_EXPOSED: Severity.INFO,
    AlertCode.DEAL_ORDER: Severity.WARNING,
    AlertCode.BURN_COUNT: Severity.WARNING,
    AlertCode.CUT_CARD_DEPTH: Severity.WARNING,
    AlertCode.CUT_CARD_MISSING: Severity.WARNING,
    AlertCode.ROUNDS_AFTER_CUT_CARD: Severity.WARNING,
    AlertCode.DEMO_ROUNDS: Severity.WARNING,
    AlertCode.LATE_BET: Severity.CRITICAL,
    AlertCode.BANKER_BET_MULTIPLE: Severity.WARNING,
    AlertCode.BET_BELOW_MINIMUM: Severity.WARNING,
    AlertCode.TABLE_LIMIT: Severity.WARNING,
    AlertCode.SQUEEZE_HOLDER: Severity.WARNING,
    AlertCode.STANDING_BET_ON_SEAT_BOX: Severity.WARNING,
    AlertCode.TIE_BET_WITHDRAWN: Severity.WARNING,
    AlertCode.TIE_BET_REDUCED: Severity.WARNING,
    AlertCode.TIE_BET_MOVED: Severity.WARNING,
    AlertCode.OUTCOME_DRIFT: Severity.WARNING,
    AlertCode.DEALER_ERROR_RATE: Severity.WARNING,
}


# The codes whose findings are graded case by case, and the severities they take.
GRADED: dict[AlertCode, tuple[Severity, ...]] = {AlertCode.ROUND_VOIDED: (Severity.WARNING, Severity.CRITICAL)}


def severities(code: AlertCode) -> tuple[Severity, ...]:
    """Every severity an alert of ``code`` may have."""
    return GRADED.get(code, (SEVERITY[code],))


@dataclass(frozen=True, slots=True)
class Finding:
    """One way play departed from the rules.

    ``article`` is the article enforced (e.g. ``"Art. 9(3)"``); ``summary`` is one sentence a
    surveillance officer understands; ``evidence`` holds the facts that prove it (JSON-ready);
    ``severity`` is the code's (``SEVERITY``) unless the finding is ``graded``.
    """

    code: AlertCode
    article: str
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    graded: Severity | None = None  # this case's severity, for a code graded case by case (ROUND_VOIDED)

    @property
    def severity(self) -> Severity:
        return self.graded or SEVERITY[self.code]
