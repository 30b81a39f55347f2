"""Money: payouts (Art. 17), commission (Art. 18), ties (Art. 12) and the bet checks (Art. 12-16).

All amounts are integers in currency units. A fraction of the 5% commission is rounded as the
house profile says (``Rounding``; the DICJ profile rounds down, so the house never takes more
than 5%); a Banker bet that is a multiple of the table minimum (house rule) with a minimum that
is a multiple of 20 never needs rounding.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

import msgspec

from .findings import AlertCode, Finding
from .play import Outcome, RoundResult


class Spot(StrEnum):
    """Where a bet lies on the layout (Art. 13)."""

    PLAYER = "player"
    BANKER = "banker"
    TIE = "tie"
    PLAYER_PAIR = "player_pair"
    BANKER_PAIR = "banker_pair"


class BetResult(StrEnum):
    WIN = "win"
    LOSE = "lose"
    PUSH = "push"  # the stake goes back: a voided round
    CARRIED = "carried"  # Art. 12: a Player or Banker bet on a tie stays for the next round


class Rounding(StrEnum):
    """How a fraction of a unit is rounded where the rules take a share of a win: the 5%
    commission, or the half a no-commission Banker 6 pays (house policy, Art. 18)."""

    DOWN = "down"
    NEAREST = "nearest"  # half a unit up
    UP = "up"


def share(numerator: int, denominator: int, rounding: Rounding) -> int:
    """``numerator / denominator`` in whole units, rounded as the house rounds.

    >>> [share(30 * 5, 100, r) for r in Rounding]  # 5% of 30 is 1.5
    [1, 2, 2]
    >>> [share(25, 2, r) for r in Rounding]
    [12, 13, 13]
    """
    if rounding == Rounding.DOWN:
        return numerator // denominator
    if rounding == Rounding.UP:
        return -(-numerator // denominator)
    return (2 * numerator + denominator) // (2 * denominator)


class Commission(StrEnum):
    """Art. 18: 5% of a Banker win, or the approved no-commission variant (Banker 6 pays half)."""

    FIVE_PERCENT = "five_percent"
    NO_COMMISSION = "no_commission"


# Art. 17: what one unit staked wins.
PAYOUT_ODDS: dict[Spot, int] = {
    Spot.PLAYER: 1,
    Spot.BANKER: 1,
    Spot.TIE: 8,
    Spot.PLAYER_PAIR: 11,
    Spot.BANKER_PAIR: 11,
}
COMMISSION_PERCENT = 5  # Art. 18


class Settlement(msgspec.Struct, frozen=True):
    """How one bet ends: ``net`` is what the patron gains (+95 on a winning Banker 100)."""

    result: BetResult
    net: int
    commission: int

    def paid_out(self, amount: int) -> int:
        """What goes back across the table: the stake and winnings, or the stake of a push."""
        if self.result == BetResult.WIN:
            return amount + self.net
        return amount if self.result == BetResult.PUSH else 0


@dataclass(frozen=True, slots=True)
class RoundTotals:
    """A round's money: stakes decided this round (carried bets are still in play), what went back
    across the table, commission, and the house's result (the patrons' net, negated)."""

    staked: int = 0
    paid_out: int = 0
    commission: int = 0
    house_net: int = 0

    def add(self, amount: int, settlement: Settlement) -> RoundTotals:
        staked, paid_out, commission, house_net = totals_of(amount, settlement)
        return RoundTotals(
            self.staked + staked,
            self.paid_out + paid_out,
            self.commission + commission,
            self.house_net + house_net,
        )


def totals_of(amount: int, settlement: Settlement) -> tuple[int, int, int, int]:
    """What one bet of ``amount`` settled so adds to its round's totals (as ``RoundTotals`` fields)."""
    decided = settlement.result != BetResult.CARRIED
    return (amount if decided else 0, settlement.paid_out(amount), settlement.commission, -settlement.net)


VOID = Settlement(BetResult.PUSH, 0, 0)  # Art. 10: a voided round returns every stake
CARRY = Settlement(BetResult.CARRIED, 0, 0)  # Art. 12


def settle(spot: Spot, amount: int, result: RoundResult, commission: Commission, rounding: Rounding = Rounding.DOWN) -> Settlement:
    """Settle one bet of ``amount`` on ``spot`` against a completed round's result; a fraction
    of the commission (or of a no-commission Banker 6's half) is rounded by ``rounding``.

    >>> from surveil.core.play import Outcome, RoundResult
    >>> banker_wins = RoundResult(3, 7, Outcome.BANKER, False, False)
    >>> settle(Spot.BANKER, 100, banker_wins, Commission.FIVE_PERCENT)
    Settlement(result=<BetResult.WIN: 'win'>, net=95, commission=5)
    """
    if spot == _BANKER or spot == _PLAYER:
        if result.outcome == _TIE_OUTCOME:
            return CARRY  # Art. 12
        won = (result.outcome == _BANKER_OUTCOME) == (spot == _BANKER)
    elif spot == _TIE:
        won = result.outcome == _TIE_OUTCOME
    else:
        won = result.player_pair if spot == _PLAYER_PAIR else result.banker_pair
    if not won:
        return Settlement(_LOSE, -amount, 0)
    if spot != _BANKER:
        return Settlement(_WIN, amount * PAYOUT_ODDS[spot], 0)
    if commission == _NO_COMMISSION:
        return Settlement(_WIN, share(amount, 2, rounding) if result.banker_total == 6 else amount, 0)
    fee = share(amount * COMMISSION_PERCENT, 100, rounding)
    return Settlement(_WIN, amount - fee, fee)


# settle runs for every bet of every round. On Python 3.11 each ``Spot.BANKER``-style lookup
# goes through ``EnumType.__getattr__`` (about 0.2 µs), so settle compares against these names,
# by value: a spot or outcome given as a plain string settles as the enum does.
_PLAYER, _BANKER, _TIE, _PLAYER_PAIR = Spot.PLAYER, Spot.BANKER, Spot.TIE, Spot.PLAYER_PAIR
_TIE_OUTCOME, _BANKER_OUTCOME = Outcome.TIE, Outcome.BANKER
_WIN, _LOSE = BetResult.WIN, BetResult.LOSE
_NO_COMMISSION = Commission.NO_COMMISSION
_SPOTS = tuple(Spot)  # iterating the enum itself costs ~1 µs, and spot_totals runs for every round


# ---- bet checks -------------------------------------------------------------------------


def check_amount(spot: Spot, amount: int, min_bet: int) -> list[Finding]:
    """House rules: every bet at least the table minimum; a Banker bet a multiple of it."""
    findings = []
    if amount < min_bet:
        findings.append(
            Finding(
                AlertCode.BET_BELOW_MINIMUM,
                "House rules (minimum bet)",
                f"A {spot} bet of {amount} is below the table minimum of {min_bet}.",
                {"spot": str(spot), "amount": amount, "min_bet": min_bet},
            )
        )
    if spot == Spot.BANKER and amount % min_bet:
        findings.append(
            Finding(
                AlertCode.BANKER_BET_MULTIPLE,
                "House rules (Banker multiple)",
                f"A Banker bet of {amount} is not a multiple of the table minimum of {min_bet}.",
                {"spot": str(spot), "amount": amount, "min_bet": min_bet},
            )
        )
    return findings


def spot_totals(bets: Iterable[tuple[Spot, int]]) -> dict[Spot, int]:
    totals = dict.fromkeys(_SPOTS, 0)
    for spot, amount in bets:
        totals[spot] += amount
    return totals


def check_table_limit(totals: Mapping[Spot, int], max_bet: int) -> list[Finding]:
    """Art. 14: the house covers the Banker/Player difference up to the table limit; the
    Tie and pair spots each up to the limit."""
    findings = []
    difference = abs(totals[Spot.BANKER] - totals[Spot.PLAYER])
    if difference > max_bet:
        findings.append(
            Finding(
                AlertCode.TABLE_LIMIT,
                "Art. 14",
                f"Banker {totals[Spot.BANKER]} against Player {totals[Spot.PLAYER]} leaves "
                f"{difference} uncovered, above the table limit of {max_bet}.",
                {"banker": totals[Spot.BANKER], "player": totals[Spot.PLAYER], "difference": difference, "max_bet": max_bet},
            )
        )
    for spot in (Spot.TIE, Spot.PLAYER_PAIR, Spot.BANKER_PAIR):
        if totals[spot] > max_bet:
            findings.append(
                Finding(
                    AlertCode.TABLE_LIMIT,
                    "Art. 14",
                    f"{totals[spot]} staked on {spot} is above the table limit of {max_bet}.",
                    {"spot": str(spot), "total": totals[spot], "max_bet": max_bet},
                )
            )
    return findings


class TieMove(StrEnum):
    """Art. 12: what a bettor may do with a Player/Banker bet left on a tie (house policy)."""

    WITHDRAW = "withdraw"  # Art. 12(1)
    KEEP = "keep"  # Art. 12(2)
    INCREASE = "increase"  # Art. 12(3)(a)
    REDUCE = "reduce"  # Art. 12(3)(a)
    MOVE = "move"  # Art. 12(3)(b)


def tie_moves(before: tuple[Spot, int], after: tuple[Spot, int] | None) -> set[TieMove]:
    """What a change to a carried bet amounts to; ``after`` is None when it was withdrawn."""
    if after is None:
        return {TieMove.WITHDRAW}
    moves = set()
    if after[0] != before[0]:
        moves.add(TieMove.MOVE)
    if after[1] < before[1]:
        moves.add(TieMove.REDUCE)
    elif after[1] > before[1]:
        moves.add(TieMove.INCREASE)
    return moves or {TieMove.KEEP}


_TIE_MOVE_CODES = {
    TieMove.WITHDRAW: (AlertCode.TIE_BET_WITHDRAWN, "Art. 12(1)", "withdrawn"),
    TieMove.REDUCE: (AlertCode.TIE_BET_REDUCED, "Art. 12(3)(a)", "reduced"),
    TieMove.MOVE: (AlertCode.TIE_BET_MOVED, "Art. 12(3)(b)", "moved to another spot"),
}


def check_tie_change(
    before: tuple[Spot, int],
    after: tuple[Spot, int] | None,
    allowed: frozenset[TieMove],
    profile: str,
) -> list[Finding]:
    """Art. 12 and the house profile: a carried bet may change only as the house allows."""
    findings = []
    for move in sorted(tie_moves(before, after) - allowed):
        code, article, verb = _TIE_MOVE_CODES[move]
        findings.append(
            Finding(
                code,
                article,
                f"A bet carried over from a tie was {verb}, which the {profile} house rules forbid.",
                {
                    "before": {"spot": str(before[0]), "amount": before[1]},
                    "after": None if after is None else {"spot": str(after[0]), "amount": after[1]},
                    "profile": profile,
                    "allowed": sorted(str(m) for m in allowed),
                },
            )
        )
    return findings


class SqueezeHolder(StrEnum):
    """Art. 16: who holds the cards where the house allows squeezing (house policy; the text says
    "the largest bet" without saying on what)."""

    LARGEST_TOTAL = "largest_total"  # the seated bettor with the largest stake in the round
    LARGEST_ON_SIDE = "largest_on_side"  # for each hand, the seated bettor with the largest bet on its spot


def squeeze_stakes(seated_bets: Iterable[tuple[str, Spot, int]], holder: SqueezeHolder) -> dict[str, dict[str, int]]:
    """Art. 16: the seated stakes that entitle a bettor to hold the cards, by group: the whole
    round (``largest_total``), or the Player and the Banker spot (``largest_on_side``); each
    ``(patron, spot, amount)`` a seated bet."""
    whole = holder == SqueezeHolder.LARGEST_TOTAL
    groups: dict[str, dict[str, int]] = {"round": {}} if whole else {"player": {}, "banker": {}}
    for patron, spot, amount in seated_bets:
        group = groups["round"] if whole else groups.get(str(spot))
        if group is not None:
            group[patron] = group.get(patron, 0) + amount
    return groups


def check_squeeze(squeezed_by: str | None, stakes: Mapping[str, Mapping[str, int]], allowed: bool) -> Finding | None:
    """Art. 16: only where the house allows it, and then by a seated bettor with the largest
    stake of a group (``squeeze_stakes``; any of them, when several stake the same)."""
    if squeezed_by is None:
        return None
    if not allowed:
        return Finding(
            AlertCode.SQUEEZE_HOLDER,
            "Art. 16(1)",
            f"Patron {squeezed_by} held the cards at a table where the house does not allow squeezing.",
            {"squeezed_by": squeezed_by, "squeeze_allowed": False},
        )
    largest = {group: max(seated.values(), default=0) for group, seated in stakes.items()}
    entitled = sorted(
        {patron for group, seated in stakes.items() for patron, stake in seated.items() if stake == largest[group] and stake > 0}
    )
    if squeezed_by in entitled:
        return None
    on_what = "" if list(stakes) == ["round"] else f" on the {' or the '.join(g.capitalize() for g in stakes)}"
    return Finding(
        AlertCode.SQUEEZE_HOLDER,
        "Art. 16(2)",
        f"Patron {squeezed_by} held the cards, but the seated patron with the largest bet{on_what} was "
        f"{' or '.join(entitled) or 'nobody'}.",
        {
            "squeezed_by": squeezed_by,
            "squeezer_stake": {group: seated.get(squeezed_by) for group, seated in stakes.items()},
            "largest_stake": largest,
            "entitled": entitled,
        },
    )
