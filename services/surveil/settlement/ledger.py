"""The settlement ledger: what was staked and paid, per bet, round, table shift and patron.

Written through the processor's ``State``, so each round's entries go to Redis in the same
MULTI/EXEC as the consumer offsets that produced them (exactly once, see docs/settlement.md).
Keys, under the ``settlement`` namespace (and the deployment's REDIS_PREFIX):

==========================================  ==============================================
``round:<table>:<round>``                   the round's settlement (``RoundRecord``, msgpack)
``bet:<table>:<round>:<bet>``               one bet's settlement (``BetSettledData``, msgpack)
``table:<table>:<shift>``                   hash ``TableTotals``: staked paid_out commission
                                            house_net rounds bets
``patron:<patron>:<shift>``                 hash ``PatronTotals``: staked paid_out commission
                                            net bets wins losses pushes
``table:<table>``, ``patron:<patron>``      hash shift -> rounds (bets) settled: their shifts
``shift:<shift>:tables``, ``:patrons``      hash table (patron) -> rounds (bets) in the shift
``shift:<shift>:rounds:<table>``            hash round -> bets settled in it
``shifts``                                  hash shift -> rounds settled
==========================================  ==============================================

The indexes let the read side (``Ledger``) find everything without scanning Redis. A bet
carried over from a tie (Art. 12) has one record for the tie round (``carried``) and one for
the round that decides it; only the deciding one counts in the totals.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timedelta, timezone
from typing import TypeVar

import msgspec

from ..core.money import BetResult
from ..events import models
from ..runtime.state import Backend, State

NAMESPACE = "settlement"
MACAU = timezone(timedelta(hours=8))
SHIFT_STARTS = (7, 15, 23)  # Macau time; three shifts of eight hours
VOID = "void"  # a RoundRecord's outcome when the round was voided (Art. 10)


def shift_of(time: datetime) -> str:
    """The shift a moment falls in, ``<gaming day>/<1-3>``; the 23:00 shift belongs to the day
    it starts, so 02:00 Macau time is still the night shift of the day before.

    >>> shift_of(datetime(2026, 11, 29, 1, 0, tzinfo=timezone.utc))  # 09:00 in Macau
    '2026-11-29/1'
    >>> shift_of(datetime(2026, 11, 29, 18, 0, tzinfo=timezone.utc))  # 02:00 on the 30th
    '2026-11-29/3'
    """
    local = time.astimezone(MACAU) - timedelta(hours=SHIFT_STARTS[0])
    return f"{local.date().isoformat()}/{local.hour // 8 + 1}"


class RoundRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A settled round: when and how it ended, its money, and the bets settled in it."""

    table_id: str
    round_id: str
    shift: str
    time: datetime  # when the round was completed or voided at the table
    outcome: str  # player, banker, tie, or void
    staked: int
    paid_out: int
    commission: int
    house_net: int
    bet_ids: list[str]


@dataclass(frozen=True, slots=True)
class TableTotals:
    staked: int = 0
    paid_out: int = 0
    commission: int = 0
    house_net: int = 0
    rounds: int = 0
    bets: int = 0


@dataclass(frozen=True, slots=True)
class PatronTotals:
    staked: int = 0
    paid_out: int = 0
    commission: int = 0
    net: int = 0  # what the patron won (negative: lost)
    bets: int = 0
    wins: int = 0
    losses: int = 0
    pushes: int = 0


Totals = TypeVar("Totals", TableTotals, PatronTotals)
Record = TypeVar("Record", bound=msgspec.Struct)
_RESULT_COUNTER = {BetResult.WIN: "wins", BetResult.LOSE: "losses", BetResult.PUSH: "pushes"}


# ---- keys (relative to the namespace) ---------------------------------------------------------


def round_key(table_id: str, round_id: str) -> str:
    return f"round:{table_id}:{round_id}"


def bet_key(table_id: str, round_id: str, bet_id: str) -> str:
    return f"bet:{table_id}:{round_id}:{bet_id}"


def table_key(table_id: str, shift: str | None = None) -> str:
    return f"table:{table_id}" if shift is None else f"table:{table_id}:{shift}"


def patron_key(patron_id: str, shift: str | None = None) -> str:
    return f"patron:{patron_id}" if shift is None else f"patron:{patron_id}:{shift}"


def shift_rounds_key(shift: str, table_id: str) -> str:
    return f"shift:{shift}:rounds:{table_id}"


SHIFTS_KEY = "shifts"


# ---- writing ----------------------------------------------------------------------------------


def is_settled(state: State, table_id: str, round_id: str) -> bool:
    return state.get(state.key(round_key(table_id, round_id)), RoundRecord) is not None


def book(state: State, record: RoundRecord, bets: list[models.BetSettledData]) -> None:
    """Enter one settled round and its bets in the ledger."""
    table, shift = record.table_id, record.shift
    state.put(state.key(round_key(table, record.round_id)), record)
    totals = state.key(table_key(table, shift))
    for name in ("staked", "paid_out", "commission", "house_net"):
        state.incr(totals, name, getattr(record, name))
    state.incr(totals, "rounds", 1)
    state.incr(state.key(table_key(table)), shift, 1)
    state.incr(state.key(f"shift:{shift}:tables"), table, 1)
    state.incr(state.key(SHIFTS_KEY), shift, 1)
    state.incr(state.key(shift_rounds_key(shift, table)), record.round_id, len(bets))
    shift_patrons = state.key(f"shift:{shift}:patrons")
    for bet in bets:
        state.put(state.key(bet_key(table, bet.round_id, bet.bet_id)), bet)
        if bet.result == BetResult.CARRIED:
            continue  # still in play: counted in the round that decides it
        state.incr(totals, "bets", 1)
        patron = state.key(patron_key(bet.patron_id, shift))
        state.incr(patron, "staked", bet.amount)
        state.incr(patron, "paid_out", paid_out(bet))
        state.incr(patron, "commission", bet.commission)
        state.incr(patron, "net", bet.net)
        state.incr(patron, "bets", 1)
        state.incr(patron, _RESULT_COUNTER[bet.result], 1)
        state.incr(state.key(patron_key(bet.patron_id)), shift, 1)
        state.incr(shift_patrons, bet.patron_id, 1)


def paid_out(bet: models.BetSettledData) -> int:
    """What went back across the table: stake and winnings on a win, the stake on a push."""
    if bet.result == BetResult.WIN:
        return bet.amount + bet.net
    return bet.amount if bet.result == BetResult.PUSH else 0


# ---- reading ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShiftLedger:
    """Everything the ledger holds for one shift, keyed for comparison."""

    shift: str
    tables: dict[str, TableTotals]
    patrons: dict[str, PatronTotals]
    rounds: dict[tuple[str, str], RoundRecord]  # (table, round)
    bets: dict[tuple[str, str, str], models.BetSettledData]  # (table, round, bet)


class Ledger:
    """The read side, on any state backend (Redis for the service, memory for a recomputation)."""

    def __init__(self, backend: Backend, namespace: str = NAMESPACE) -> None:
        self.backend = backend
        self.namespace = namespace

    def _counters(self, key: str) -> dict[str, int]:
        return self.backend.counters(f"{self.namespace}:{key}")

    def _value(self, key: str, type_: type[Record]) -> Record | None:
        raw = self.backend.read(f"{self.namespace}:{key}")
        return None if raw is None else msgspec.msgpack.decode(raw, type=type_)

    @staticmethod
    def _totals(type_: type[Totals], counters: dict[str, int]) -> Totals:
        return type_(**{f.name: counters.get(f.name, 0) for f in fields(type_)})

    def shifts(self) -> list[str]:
        return sorted(self._counters(SHIFTS_KEY))

    def table(self, table_id: str, shift: str) -> TableTotals:
        return self._totals(TableTotals, self._counters(table_key(table_id, shift)))

    def table_shifts(self, table_id: str) -> dict[str, TableTotals]:
        return {shift: self.table(table_id, shift) for shift in sorted(self._counters(table_key(table_id)))}

    def patron(self, patron_id: str, shift: str) -> PatronTotals:
        return self._totals(PatronTotals, self._counters(patron_key(patron_id, shift)))

    def patron_shifts(self, patron_id: str) -> dict[str, PatronTotals]:
        return {shift: self.patron(patron_id, shift) for shift in sorted(self._counters(patron_key(patron_id)))}

    def round(self, table_id: str, round_id: str) -> RoundRecord | None:
        return self._value(round_key(table_id, round_id), RoundRecord)

    def bet(self, table_id: str, round_id: str, bet_id: str) -> models.BetSettledData | None:
        return self._value(bet_key(table_id, round_id, bet_id), models.BetSettledData)

    def shift(self, shift: str) -> ShiftLedger:
        tables = {t: self.table(t, shift) for t in sorted(self._counters(f"shift:{shift}:tables"))}
        patrons = {p: self.patron(p, shift) for p in sorted(self._counters(f"shift:{shift}:patrons"))}
        rounds: dict[tuple[str, str], RoundRecord] = {}
        bets: dict[tuple[str, str, str], models.BetSettledData] = {}
        for table in tables:
            for round_id in sorted(self._counters(shift_rounds_key(shift, table))):
                record = self.round(table, round_id)
                if record is None:
                    continue  # cannot happen: the index and the record are written together
                rounds[table, round_id] = record
                for bet_id in record.bet_ids:
                    bet = self.bet(table, round_id, bet_id)
                    if bet is not None:
                        bets[table, round_id, bet_id] = bet
        return ShiftLedger(shift, tables, patrons, rounds, bets)


def add(a: Totals, b: Totals) -> Totals:
    """Two totals summed field by field (a patron's shifts into one figure)."""
    return type(a)(*(getattr(a, f.name) + getattr(b, f.name) for f in fields(a)))
