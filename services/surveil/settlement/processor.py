"""Settlement: every bet of every completed round paid once, by Art. 10, 12, 13, 17 and 18.

Reads ``baccarat.table``. A round's bets are kept from ``round.opened`` to its end; then each
bet is settled by ``core.money.settle`` with the commission of the round's house profile (a
round voided under Art. 10 returns every stake), ``baccarat.bet.settled`` and
``baccarat.round.settled`` are published, and the round is booked in the ledger
(``ledger.py``). Player and Banker bets on a tie are settled ``carried`` (Art. 12) and join the
table's next round when its ``round.opened`` names them.

Settlement pays the bets as the table recorded them, by the result the table declared. Irregular
play that can still be paid (a late bet, a bet under the minimum, a forbidden change after a tie,
a declared result the cards contradict) is the detectors' to flag. What cannot be settled is
rejected, to the dead-letter topic, before anything changes: an unknown round or bet, a round
opened or ended twice, a bet placed twice, a stake that is not positive, a spot the house does
not offer.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar

import msgspec

from ..core import money
from ..core.money import BetResult, Commission, Rounding, Settlement, Spot
from ..core.play import RoundResult
from ..core.profiles import HouseProfile, load_profile
from ..core.table import Bet, Round
from ..events import codec, models, topics
from ..runtime.processor import Rejected
from ..runtime.state import State
from . import ledger, metrics

SOURCE = "settlement"


class CarriedBets(msgspec.Struct):
    """Player and Banker bets left on a table's last tie (Art. 12), for its next round."""

    bets: dict[str, Bet] = {}


def _reject(kind: str, reason: str) -> Rejected:
    metrics.REJECTIONS.labels(kind).inc()
    return Rejected(reason)


class SettlementProcessor:
    name: ClassVar[str] = "settlement"
    consumes: ClassVar[tuple[str, ...]] = (topics.TABLE,)

    def process(self, event: models.Event, state: State) -> Sequence[models.Event]:
        handler = _HANDLERS.get(type(event))
        if handler is None:
            return ()
        table_id = event.data.table_id  # type: ignore[attr-defined]
        if event.subject != table_id:
            raise _reject("invalid", f"event {event.id}: subject {event.subject} is not its table {table_id}")
        return handler(self, event, state)

    def prefetch(self, events: Sequence[models.Event], state: State) -> None:
        """Read, in one round trip, what ``events`` will look up: each round's open state, and
        for an opening also the round's ledger record and the table's carried bets."""
        keys = []
        for event in events:
            if type(event) in _HANDLERS:
                d = event.data  # type: ignore[attr-defined]
                keys.append(self._round_key(state, d.table_id, d.round_id))
                if isinstance(d, models.RoundOpenedData):
                    keys += (state.key(ledger.round_key(d.table_id, d.round_id)), state.key("carried", d.table_id))
        state.prefetch(*keys)

    # ---- opening a round and its bets -------------------------------------------------------

    def _opened(self, event: models.RoundOpened, state: State) -> list[models.Event]:
        d = event.data
        carried_key = state.key("carried", d.table_id)
        if self._open_round(state, d.table_id, d.round_id) is not None or ledger.is_settled(state, d.table_id, d.round_id):
            raise _reject("duplicate", f"round {d.round_id} at {d.table_id} was already opened")
        carried = state.get(carried_key, CarriedBets) or CarriedBets()
        # A carried bet the round does not name was withdrawn (Art. 12(1)): its stake went back,
        # and the ledger never counted it. An id settlement never carried names a bet it already
        # refused or still holds in an unsettled round: that was dead-lettered at the time.
        bets = {bet_id: carried.bets[bet_id] for bet_id in d.carried_bet_ids if bet_id in carried.bets}
        if carried.bets:
            state.delete(carried_key)
        open_round = Round(
            d.table_id, d.round_id, d.shoe_id, d.round_no, d.dealer_id, d.profile, d.demo, d.min_bet, d.max_bet, d.currency, bets
        )
        state.put(self._round_key(state, d.table_id, d.round_id), open_round)
        return []

    def _placed(self, event: models.BetPlaced, state: State) -> list[models.Event]:
        d = event.data
        open_round = self._require_open(state, d.table_id, d.round_id)
        if d.bet_id in open_round.bets:
            raise _reject("duplicate", f"bet {d.bet_id} was already placed on round {d.round_id}")
        self._check_stake(open_round, d.bet_id, d.spot, d.amount)
        open_round.bets[d.bet_id] = Bet(d.bet_id, d.patron_id, d.seat, d.spot, d.amount)
        state.put(self._round_key(state, d.table_id, d.round_id), open_round)
        return []

    def _changed(self, event: models.BetChanged, state: State) -> list[models.Event]:
        d = event.data
        open_round = self._require_open(state, d.table_id, d.round_id)
        bet = self._require_bet(open_round, d.bet_id)
        self._check_stake(open_round, d.bet_id, d.spot, d.amount)
        bet.spot, bet.amount = d.spot, d.amount
        state.put(self._round_key(state, d.table_id, d.round_id), open_round)
        return []

    def _withdrawn(self, event: models.BetWithdrawn, state: State) -> list[models.Event]:
        d = event.data
        open_round = self._require_open(state, d.table_id, d.round_id)
        self._require_bet(open_round, d.bet_id)
        del open_round.bets[d.bet_id]
        state.put(self._round_key(state, d.table_id, d.round_id), open_round)
        return []

    # ---- ending a round ---------------------------------------------------------------------

    def _completed(self, event: models.RoundCompleted, state: State) -> list[models.Event]:
        d = event.data
        open_round = self._require_open(state, d.table_id, d.round_id)
        open_round.declared = RoundResult(d.player_total, d.banker_total, d.outcome, d.player_pair, d.banker_pair)
        settled = open_round.settlements(*_payouts(open_round))
        carried = {bet.bet_id: bet for bet, s in settled if s.result == BetResult.CARRIED}
        if carried:
            carried_key = state.key("carried", d.table_id)
            waiting = state.get(carried_key, CarriedBets) or CarriedBets()
            state.put(carried_key, CarriedBets({**waiting.bets, **carried}))
        return self._settle(state, open_round, settled, str(d.outcome), event.time)

    def _voided(self, event: models.RoundVoided, state: State) -> list[models.Event]:
        d = event.data
        open_round = self._require_open(state, d.table_id, d.round_id)
        open_round.voided = True
        settled = open_round.settlements(*_payouts(open_round))  # Art. 10: every stake back
        return self._settle(state, open_round, settled, ledger.VOID, event.time)

    def _settle(
        self, state: State, open_round: Round, settled: list[tuple[Bet, Settlement]], outcome: str, at: datetime
    ) -> list[models.Event]:
        table_id, round_id = open_round.table_id, open_round.round_id
        source = f"{SOURCE}/{table_id}"
        totals = money.RoundTotals()
        bets: list[models.BetSettledData] = []
        outputs: list[models.Event] = []
        for bet, settlement in settled:
            totals = totals.add(bet.amount, settlement)
            data = models.BetSettledData(
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
            bets.append(data)
            outputs.append(codec.make(models.BetSettled, data, id=f"{table_id}:{round_id}:{bet.bet_id}:settled", source=source, time=at))
        round_data = models.RoundSettledData(
            table_id=table_id,
            round_id=round_id,
            staked=totals.staked,
            paid_out=totals.paid_out,
            commission=totals.commission,
            house_net=totals.house_net,
        )
        outputs.append(codec.make(models.RoundSettled, round_data, id=f"{table_id}:{round_id}:settled", source=source, time=at))
        record = ledger.RoundRecord(
            table_id=table_id,
            round_id=round_id,
            shift=ledger.shift_of(at),
            time=at,
            outcome=outcome,
            staked=totals.staked,
            paid_out=totals.paid_out,
            commission=totals.commission,
            house_net=totals.house_net,
            bet_ids=[bet.bet_id for bet in bets],
        )
        ledger.book(state, record, bets)
        state.delete(self._round_key(state, table_id, round_id))
        _observe(record, bets)
        return outputs

    # ---- checks (before anything changes) -------------------------------------------------------

    @staticmethod
    def _round_key(state: State, table_id: str, round_id: str) -> str:
        return state.key("open", table_id, round_id)

    def _open_round(self, state: State, table_id: str, round_id: str) -> Round | None:
        return state.get(self._round_key(state, table_id, round_id), Round)

    def _require_open(self, state: State, table_id: str, round_id: str) -> Round:
        open_round = self._open_round(state, table_id, round_id)
        if open_round is not None:
            return open_round
        if ledger.is_settled(state, table_id, round_id):
            raise _reject("duplicate", f"round {round_id} at {table_id} was already settled")
        raise _reject("unknown", f"unknown round {round_id} at {table_id}")

    @staticmethod
    def _require_bet(open_round: Round, bet_id: str) -> Bet:
        bet = open_round.bets.get(bet_id)
        if bet is None:
            raise _reject("unknown", f"unknown bet {bet_id} on round {open_round.round_id}")
        return bet

    @staticmethod
    def _check_stake(open_round: Round, bet_id: str, spot: Spot, amount: int) -> None:
        if amount <= 0:
            raise _reject("invalid", f"bet {bet_id}: a stake of {amount} cannot be settled")
        profile = _profile(open_round)
        if not profile.offers(spot):
            raise _reject("invalid", f"bet {bet_id}: the {profile.name} house does not offer {spot} bets (Art. 13)")


def _profile(open_round: Round) -> HouseProfile:
    return load_profile(open_round.profile)  # known: the contract refuses a round.opened naming another


def _payouts(open_round: Round) -> tuple[Commission, Rounding]:
    """Art. 18 as the round's house takes it: the commission, and how a fraction of it is rounded."""
    profile = _profile(open_round)
    return profile.commission, profile.commission_rounding


def _observe(record: ledger.RoundRecord, bets: list[models.BetSettledData]) -> None:
    staked, paid_out, commission, house_net = metrics.for_table(record.table_id)
    staked.inc(record.staked)
    paid_out.inc(record.paid_out)
    commission.inc(record.commission)
    house_net.inc(record.house_net)
    metrics.ROUNDS.labels(record.outcome).inc()
    for (result, spot), count in Counter((bet.result, bet.spot) for bet in bets).items():
        metrics.bets(result, spot).inc(count)
    metrics.LAG_SECONDS.observe(max(time.time() - record.time.timestamp(), 0.0))


Handler = Callable[[SettlementProcessor, Any, State], list[models.Event]]
_HANDLERS: dict[type[models.Event], Handler] = {
    models.RoundOpened: SettlementProcessor._opened,
    models.BetPlaced: SettlementProcessor._placed,
    models.BetChanged: SettlementProcessor._changed,
    models.BetWithdrawn: SettlementProcessor._withdrawn,
    models.RoundCompleted: SettlementProcessor._completed,
    models.RoundVoided: SettlementProcessor._voided,
}
