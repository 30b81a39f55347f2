"""The settlement ledger: what was paid, per bet, round, patron and table shift.

Keys (all under the ``settlement`` namespace, written in the same Redis transaction as the
consumer offsets that produced them, so each settlement is booked exactly once):

- ``settlement:bet:<round_id>:<bet_id>``: the bet's settlement (msgpack of ``BetSettledData``)
- ``settlement:round:<round_id>``: counters ``staked paid_out commission house_net bets``
- ``settlement:patron:<patron_id>``: ``staked paid_out commission net bets wins losses``
- ``settlement:table:<table_id>:<shift>``: ``staked paid_out commission house_net rounds bets``

A shift is one of three eight-hour shifts of the Macau gaming day (UTC+8), starting 07:00,
15:00 and 23:00, named like ``2026-11-29/2``; the 23:00 shift belongs to the day it starts.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ..core.money import BetResult
from ..events import models as m
from ..runtime.state import State

MACAU = timezone(timedelta(hours=8))
SHIFT_STARTS = (7, 15, 23)


def shift_of(time: datetime) -> str:
    """The shift a moment falls in, e.g. ``2026-11-29/1`` for 09:00 Macau time."""
    local = time.astimezone(MACAU) - timedelta(hours=SHIFT_STARTS[0])
    return f"{local.date().isoformat()}/{local.hour // 8 + 1}"


def bet_key(state: State, round_id: str, bet_id: str) -> str:
    return state.key("bet", round_id, bet_id)


def round_key(state: State, round_id: str) -> str:
    return state.key("round", round_id)


def patron_key(state: State, patron_id: str) -> str:
    return state.key("patron", patron_id)


def table_key(state: State, table_id: str, shift: str) -> str:
    return state.key("table", table_id, shift)


def book_bet(state: State, data: m.BetSettledData, time: datetime) -> None:
    state.put(bet_key(state, data.round_id, data.bet_id), data)
    decided = data.result is not BetResult.CARRIED
    paid_out = data.amount + data.net if data.result in (BetResult.WIN, BetResult.PUSH) else 0
    for key in (round_key(state, data.round_id), table_key(state, data.table_id, shift_of(time))):
        state.incr(key, "bets", 1)
    patron = patron_key(state, data.patron_id)
    if decided:
        state.incr(patron, "staked", data.amount)
        state.incr(patron, "paid_out", paid_out)
        state.incr(patron, "commission", data.commission)
        state.incr(patron, "net", data.net)
        state.incr(patron, "bets", 1)
        if data.result is BetResult.WIN:
            state.incr(patron, "wins", 1)
        elif data.result is BetResult.LOSE:
            state.incr(patron, "losses", 1)


def book_round(state: State, data: m.RoundSettledData, time: datetime) -> None:
    for key in (round_key(state, data.round_id), table_key(state, data.table_id, shift_of(time))):
        state.incr(key, "staked", data.staked)
        state.incr(key, "paid_out", data.paid_out)
        state.incr(key, "commission", data.commission)
        state.incr(key, "house_net", data.house_net)
    state.incr(table_key(state, data.table_id, shift_of(time)), "rounds", 1)
