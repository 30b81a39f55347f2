"""What the simulator can do wrong on request, and the ground truth it writes down when it does.

Every alert code the table side can cause is injectable. An injection waits at its table until a
round (or a shoe) where it can be done cleanly, so that it causes its own alert and nothing else
the rules would flag; then the simulator records a ``Label``: table, shoe, round and a sentence
saying what was done.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

import msgspec

from ..core.findings import AlertCode
from ..core.money import TieMove
from ..core.profiles import HouseProfile


class Scope(Enum):
    ROUND = "round"  # done within one round, once the round allows it
    SHOE = "shoe"  # decided when a shoe starts
    SETTLEMENT = "settlement"  # done to the settlement events of a round, after the settlement service


SCOPES: dict[AlertCode, Scope] = {
    AlertCode.DRAW_PLAYER_MISSING: Scope.ROUND,
    AlertCode.DRAW_PLAYER_EXTRA: Scope.ROUND,
    AlertCode.DRAW_BANKER_MISSING: Scope.ROUND,
    AlertCode.DRAW_BANKER_EXTRA: Scope.ROUND,
    AlertCode.DEAL_ORDER: Scope.ROUND,
    AlertCode.RESULT_MISMATCH: Scope.ROUND,
    AlertCode.CARD_MISMATCH: Scope.ROUND,
    AlertCode.CARD_UNACCOUNTED: Scope.ROUND,
    AlertCode.CARD_OVERCOUNT: Scope.ROUND,
    AlertCode.CARD_EXPOSED: Scope.ROUND,
    AlertCode.LATE_BET: Scope.ROUND,
    AlertCode.BANKER_BET_MULTIPLE: Scope.ROUND,
    AlertCode.BET_BELOW_MINIMUM: Scope.ROUND,
    AlertCode.TABLE_LIMIT: Scope.ROUND,
    AlertCode.SQUEEZE_HOLDER: Scope.ROUND,
    AlertCode.TIE_BET_WITHDRAWN: Scope.ROUND,
    AlertCode.TIE_BET_REDUCED: Scope.ROUND,
    AlertCode.TIE_BET_MOVED: Scope.ROUND,
    AlertCode.ROUND_VOIDED: Scope.ROUND,
    AlertCode.CARD_REUSED: Scope.ROUND,
    AlertCode.BURN_MID_ROUND: Scope.ROUND,
    AlertCode.STANDING_BET_ON_SEAT_BOX: Scope.ROUND,
    AlertCode.BURN_COUNT: Scope.SHOE,
    AlertCode.CUT_CARD_DEPTH: Scope.SHOE,
    AlertCode.CUT_CARD_MISSING: Scope.SHOE,
    AlertCode.ROUNDS_AFTER_CUT_CARD: Scope.SHOE,
    AlertCode.DEMO_ROUNDS: Scope.SHOE,
    AlertCode.OUTCOME_DRIFT: Scope.SHOE,
    AlertCode.PATRON_WIN_RATE: Scope.SHOE,
    AlertCode.DEALER_ERROR_RATE: Scope.SHOE,
    AlertCode.SHOE_REPEAT: Scope.SHOE,
    AlertCode.PAYOUT_MISMATCH: Scope.SETTLEMENT,
    AlertCode.UNSETTLED_BET: Scope.SETTLEMENT,
    AlertCode.DUPLICATE_SETTLEMENT: Scope.SETTLEMENT,
}
INJECTABLE: tuple[AlertCode, ...] = tuple(SCOPES)

# The draw errors, and the tie-bet changes with the move each one makes.
DRAW_ERRORS = (
    AlertCode.DRAW_PLAYER_MISSING,
    AlertCode.DRAW_PLAYER_EXTRA,
    AlertCode.DRAW_BANKER_MISSING,
    AlertCode.DRAW_BANKER_EXTRA,
)
TIE_CHANGES: dict[AlertCode, TieMove] = {
    AlertCode.TIE_BET_WITHDRAWN: TieMove.WITHDRAW,
    AlertCode.TIE_BET_REDUCED: TieMove.REDUCE,
    AlertCode.TIE_BET_MOVED: TieMove.MOVE,
}


class InjectionError(ValueError):
    """An injection that cannot be made: unknown, impossible under the profile, or not done."""


class Label(msgspec.Struct, frozen=True, omit_defaults=True):
    """Ground truth: an irregularity the simulator put in, and where (one JSON line each)."""

    table_id: str
    shoe_id: str
    code: str
    description: str
    round_id: str | None = None
    round_no: int | None = None
    dealer_id: str | None = None
    patron_id: str | None = None
    bet_id: str | None = None


def parse_codes(text: str) -> tuple[AlertCode, ...]:
    """``"LATE_BET,CARD_EXPOSED"`` -> the codes, each checked to be injectable."""
    codes = []
    for name in (part.strip() for part in text.split(",")):
        if not name:
            continue
        try:
            codes.append(AlertCode(name.upper()))
        except ValueError:
            raise InjectionError(f"unknown alert code {name!r}; injectable: {', '.join(INJECTABLE)}") from None
    return tuple(codes)


def check_codes(codes: Iterable[AlertCode], profile: HouseProfile, shoes: int) -> None:
    """Refuse injections the run cannot show, before it starts."""
    for code in codes:
        if code not in SCOPES:
            raise InjectionError(f"{code} is not something the table side can cause")
        move = TIE_CHANGES.get(code)
        if move is not None and move in profile.after_tie:
            raise InjectionError(
                f"{code}: the {profile.name} profile allows that after a tie; use a profile that forbids it (e.g. --profile sjm)"
            )
        if code is AlertCode.SHOE_REPEAT and shoes < 2:
            raise InjectionError("SHOE_REPEAT repeats an earlier shoe at the table: it needs at least 2 shoes")
