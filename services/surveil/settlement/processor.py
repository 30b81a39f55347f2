"""Settlement: every bet of every completed round paid once, by Art. 12, 13, 17 and 18.

Reads ``baccarat.table``; for each completed round settles each bet (win, lose, or carried on a
tie), for a voided round returns every stake (push), publishes ``baccarat.bet.settled`` and
``baccarat.round.settled``, and books each settlement in the ledger (``ledger.py``). Input that
cannot be settled is rejected to the dead-letter topic and changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar

import msgspec

from ..core import money
from ..core.money import BetResult, Settlement, Spot
from ..core.play import RoundResult
from ..core.profiles import InvalidProfileError, load_profile
from ..events import codec
from ..events import models as m
from ..runtime.processor import Rejected
from ..runtime.state import State
from . import ledger

SOURCE = "settlement"
REMEMBERED_ROUNDS = 64  # ended rounds remembered per table, to refuse a round completed twice


class OpenBet(msgspec.Struct):
    bet_id: str
    patron_id: str
    spot: Spot
    amount: int


class Book(msgspec.Struct):
    """One table's open round and its bets."""

    table_id: str
    round_id: str | None = None
    profile: str = ""
    bets: dict[str, OpenBet] = {}
    carried: dict[str, OpenBet] = {}  # Player/Banker bets left on the last tie (Art. 12)
    ended_rounds: list[str] = []


class SettlementProcessor:
    name: ClassVar[str] = "settlement"
    consumes: ClassVar[tuple[str, ...]] = (m.TABLE_TOPIC,)

    def process(self, event: m.Event, state: State) -> Sequence[m.Event]:
        handler = _HANDLERS.get(type(event))
        if handler is None:
            return ()
        key = state.key("book", event.subject)
        book = state.get(key, Book) or Book(event.subject)
        outputs = handler(self, book, event, state)
        state.put(key, book)
        return outputs

    # ---- the round's bets ---------------------------------------------------------------------

    def _opened(self, book: Book, event: m.RoundOpened, state: State) -> list[m.Event]:
        d = event.data
        if d.round_id == book.round_id or d.round_id in book.ended_rounds:
            raise Rejected(f"round {d.round_id} was already opened")
        try:
            load_profile(d.profile)
        except InvalidProfileError as error:
            raise Rejected(f"round {d.round_id}: {error}") from None
        book.round_id, book.profile = d.round_id, d.profile
        book.bets = {bet_id: book.carried[bet_id] for bet_id in d.carried_bet_ids if bet_id in book.carried}
        book.carried = {}
        return []

    def _placed(self, book: Book, event: m.BetPlaced, state: State) -> list[m.Event]:
        d = event.data
        self._check_open(book, d.round_id)
        if d.bet_id in book.bets:
            raise Rejected(f"bet {d.bet_id} was already placed on round {d.round_id}")
        if d.amount <= 0:
            raise Rejected(f"bet {d.bet_id}: a stake of {d.amount} cannot be settled")
        book.bets[d.bet_id] = OpenBet(d.bet_id, d.patron_id, d.spot, d.amount)
        return []

    def _changed(self, book: Book, event: m.BetChanged, state: State) -> list[m.Event]:
        d = event.data
        bet = self._open_bet(book, d.round_id, d.bet_id)
        if d.amount <= 0:
            raise Rejected(f"bet {d.bet_id}: a stake of {d.amount} cannot be settled")
        bet.spot, bet.amount = d.spot, d.amount
        return []

    def _withdrawn(self, book: Book, event: m.BetWithdrawn, state: State) -> list[m.Event]:
        d = event.data
        self._open_bet(book, d.round_id, d.bet_id)
        del book.bets[d.bet_id]
        return []

    def _check_open(self, book: Book, round_id: str) -> None:
        if round_id in book.ended_rounds:
            raise Rejected(f"round {round_id} has already ended")
        if round_id != book.round_id:
            raise Rejected(f"unknown round {round_id}")

    def _open_bet(self, book: Book, round_id: str, bet_id: str) -> OpenBet:
        self._check_open(book, round_id)
        bet = book.bets.get(bet_id)
        if bet is None:
            raise Rejected(f"unknown bet {bet_id} on round {round_id}")
        return bet

    # ---- settling -----------------------------------------------------------------------------

    def _completed(self, book: Book, event: m.RoundCompleted, state: State) -> list[m.Event]:
        d = event.data
        self._check_open(book, d.round_id)
        result = RoundResult(d.player_total, d.banker_total, d.outcome, d.player_pair, d.banker_pair)
        commission = load_profile(book.profile).commission
        settled = [(bet, money.settle(bet.spot, bet.amount, result, commission)) for bet in book.bets.values()]
        book.carried = {bet.bet_id: bet for bet, s in settled if s.result is BetResult.CARRIED}
        return self._book(book, d.round_id, settled, event.time, state)

    def _voided(self, book: Book, event: m.RoundVoided, state: State) -> list[m.Event]:
        d = event.data
        self._check_open(book, d.round_id)
        book.carried = {}
        return self._book(book, d.round_id, [(bet, money.VOID) for bet in book.bets.values()], event.time, state)

    def _book(
        self, book: Book, round_id: str, settled: list[tuple[OpenBet, Settlement]], time: datetime, state: State
    ) -> list[m.Event]:
        table_id = book.table_id
        totals = money.RoundTotals()
        outputs: list[m.Event] = []
        for bet, settlement in settled:
            totals = totals.add(bet.amount, settlement)
            data = m.BetSettledData(
                table_id=table_id,
                round_id=round_id,
                bet_id=bet.bet_id,
                patron_id=bet.patron_id,
                spot=bet.spot,
                amount=bet.amount,
                result=settlement.result,
                net=settlement.net,
                commission=settlement.commission,
            )
            ledger.book_bet(state, data, time)
            outputs.append(codec.make(m.BetSettled, data, id=f"bet-settled:{round_id}:{bet.bet_id}", source=SOURCE, time=time))
        round_data = m.RoundSettledData(
            table_id=table_id,
            round_id=round_id,
            staked=totals.staked,
            paid_out=totals.paid_out,
            commission=totals.commission,
            house_net=totals.house_net,
        )
        ledger.book_round(state, round_data, time)
        outputs.append(codec.make(m.RoundSettled, round_data, id=f"round-settled:{round_id}", source=SOURCE, time=time))
        book.round_id, book.bets = None, {}
        book.ended_rounds = [*book.ended_rounds[-(REMEMBERED_ROUNDS - 1):], round_id]
        return outputs


_HANDLERS = {
    m.RoundOpened: SettlementProcessor._opened,
    m.BetPlaced: SettlementProcessor._placed,
    m.BetChanged: SettlementProcessor._changed,
    m.BetWithdrawn: SettlementProcessor._withdrawn,
    m.RoundCompleted: SettlementProcessor._completed,
    m.RoundVoided: SettlementProcessor._voided,
}
