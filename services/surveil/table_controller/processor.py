"""The table-controller: a table's round, rebuilt from its dealer console and bet sensors
(``baccarat.inputs``) and its card-reading shoe (``baccarat.shoe``), published as the
``baccarat.table`` events (docs/table-inputs.md has the inputs and the state machine).

It records what the table did, rules broken or not (a late bet, an extra card, a wrong result):
judging is the detectors' job. It rejects, to the dead letters, only input that cannot describe a
table at all: a bet when no round is in progress, a round opened over another, a bet id used
twice, an input delivered twice.

The two topics are not ordered with respect to each other, so nothing published may depend on
how they interleave. A hand card the hand box did not recognise is the shoe's read of its index;
when the result is announced before the shoe's read arrived, the round's completion waits for it,
and every table event after it waits too (in ``Completion.then``), so the table stream keeps its
order. If the shoe ends without reading the card, the round is voided. Output ids are derived from
the inputs (the round id from table, shoe and round number; bet events from the input id), so a
restart or redelivery publishes the same ids.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import ClassVar

import msgspec

from ..core.money import Spot
from ..core.play import Outcome, RoundResult
from ..core.profiles import InvalidProfileError, load_profile
from ..core.table import Bet, HandCard, Round, Shoe, outside_the_table
from ..events import codec, models, topics
from ..runtime.processor import Rejected
from ..runtime.state import State

SOURCE = "table-controller"
REMEMBERED_INPUTS = 64  # input ids kept per table to recognise one delivered twice


class Completion(msgspec.Struct):
    """A round whose result was announced before the shoe read all its cards, and the table
    events that came after it (encoded), held back so the table stream keeps its order."""

    round: Round
    time: datetime
    then: list[bytes] = []


class Burn(msgspec.Struct):
    """Cards burned while no round was in progress: their shoe is the next round's."""

    input_id: str
    time: datetime
    indices: list[int]


class Table(msgspec.Struct):
    table_id: str
    shoe_id: str | None = None  # the shoe of the latest round opened
    round_no: int = 0  # rounds opened in that shoe
    round: Round | None = None  # the round in progress
    carried: dict[str, Bet] = {}  # Player/Banker bets left on the last tie (Art. 12)
    burns: list[Burn] = []
    waiting: list[Completion] = []
    recent_inputs: list[str] = []
    shoes: list[str] = []  # shoes whose reads are kept, in the order they started


Handler = Callable[["TableController", Table, models.Event, State], list[models.Event]]


class TableController:
    name: ClassVar[str] = "table-controller"
    consumes: ClassVar[tuple[str, ...]] = (topics.SHOE, topics.INPUTS)

    def prefetch(self, events: Sequence[models.Event], state: State) -> None:
        """Read, in one round trip, the state a batch of events needs: each table's, and the
        reads of each shoe its shoe events go to."""
        keys = []
        for event in events:
            if type(event) in _HANDLERS:
                d = event.data  # type: ignore[attr-defined]
                keys.append(state.key("table", d.table_id))
                if event.topic == topics.SHOE:
                    keys.append(_shoe_key(state, d.table_id, d.shoe_id))
        state.prefetch(*keys)

    def process(self, event: models.Event, state: State) -> Sequence[models.Event]:
        handler = _HANDLERS.get(type(event))
        if handler is None:
            return ()
        table_id = event.data.table_id  # type: ignore[attr-defined]
        if event.subject != table_id:
            raise Rejected(f"event {event.id}: subject {event.subject} is not its table {table_id}")
        key = state.key("table", table_id)
        table = state.get(key, Table) or Table(table_id)
        if event.topic == topics.SHOE:
            outputs = handler(self, table, event, state)
        else:
            if event.id in table.recent_inputs:
                raise Rejected(f"input {event.id} was already taken: a duplicate")
            outputs = handler(self, table, event, state)
            table.recent_inputs = [*table.recent_inputs[-(REMEMBERED_INPUTS - 1) :], event.id]
            if table.waiting:  # after a round still waiting for the shoe
                table.waiting[-1].then.extend(codec.encode(output) for output in outputs)
                outputs = []
        state.put(key, table)
        return outputs

    # ---- the round: opening and bets ------------------------------------------------------------

    def _open(self, table: Table, event: models.RoundOpen, state: State) -> list[models.Event]:
        d = event.data
        if table.round is not None:
            raise Rejected(f"round.open while round {table.round.round_id} is in progress (announce its result or void it first)")
        try:
            load_profile(d.profile)
        except InvalidProfileError as error:
            raise Rejected(f"round.open: {error}") from None
        if d.shoe_id != table.shoe_id:
            table.shoe_id, table.round_no = d.shoe_id, 0
            self._forget_shoes_before(table, d.shoe_id, state)
        table.round_no += 1
        round_id = models.round_id_of(table.table_id, d.shoe_id, table.round_no)
        outputs: list[models.Event] = [
            _make(
                models.CardsBurned,
                models.CardsBurnedData(table_id=table.table_id, shoe_id=d.shoe_id, round_id=None, indices=burn.indices),
                f"{burn.input_id}/burned",
                burn.time,
            )
            for burn in table.burns
        ]
        table.burns = []
        table.round = Round(
            table.table_id,
            round_id,
            d.shoe_id,
            table.round_no,
            d.dealer_id,
            d.profile,
            d.demo,
            d.min_bet,
            d.max_bet,
            d.currency,
            table.carried,
            seats=d.seats,
        )
        table.carried = {}
        opened = models.RoundOpenedData(
            table_id=table.table_id,
            shoe_id=d.shoe_id,
            round_id=round_id,
            round_no=table.round_no,
            dealer_id=d.dealer_id,
            profile=d.profile,
            demo=d.demo,
            min_bet=d.min_bet,
            max_bet=d.max_bet,
            currency=d.currency,
            carried_bet_ids=list(table.round.bets),
            seats=d.seats,
        )
        outputs.append(_make(models.RoundOpened, opened, f"{round_id}/opened", event.time))
        return outputs

    def _place(self, table: Table, event: models.BetPlace, state: State) -> list[models.Event]:
        d = event.data
        rnd = _in_progress(table, "bet.place")
        if d.bet_id in rnd.bets:
            raise Rejected(f"bet.place: bet {d.bet_id} is already on round {rnd.round_id}")
        _check_stake(d.bet_id, d.amount)
        for what, place in (("seat", d.seat), ("box", d.box)):
            if place is not None and outside_the_table(rnd, place):
                raise Rejected(f"bet.place: bet {d.bet_id} names {what} {place}; the table has {rnd.seats} seats")
        rnd.bets[d.bet_id] = Bet(d.bet_id, d.patron_id, d.seat, d.spot, d.amount, box=d.box)
        data = models.BetPlacedData(
            table_id=table.table_id,
            round_id=rnd.round_id,
            bet_id=d.bet_id,
            patron_id=d.patron_id,
            seat=d.seat,
            spot=d.spot,
            amount=d.amount,
            box=d.box,
        )
        return [_make(models.BetPlaced, data, f"{event.id}/placed", event.time)]

    def _change(self, table: Table, event: models.BetChange, state: State) -> list[models.Event]:
        d = event.data
        bet = _active_bet(_in_progress(table, "bet.change"), d.bet_id, "bet.change")
        _check_stake(d.bet_id, d.amount)
        bet.spot, bet.amount = d.spot, d.amount
        data = models.BetChangedData(table_id=table.table_id, round_id=_round_id(table), bet_id=d.bet_id, spot=d.spot, amount=d.amount)
        return [_make(models.BetChanged, data, f"{event.id}/changed", event.time)]

    def _withdraw(self, table: Table, event: models.BetWithdraw, state: State) -> list[models.Event]:
        d = event.data
        _active_bet(_in_progress(table, "bet.withdraw"), d.bet_id, "bet.withdraw").withdrawn = True
        data = models.BetWithdrawnData(table_id=table.table_id, round_id=_round_id(table), bet_id=d.bet_id)
        return [_make(models.BetWithdrawn, data, f"{event.id}/withdrawn", event.time)]

    def _close(self, table: Table, event: models.BetsClose, state: State) -> list[models.Event]:
        rnd = _in_progress(table, "bets.close")
        if rnd.closed:
            raise Rejected(f"bets.close: bets on round {rnd.round_id} are already closed")
        rnd.closed = True
        data = models.BetsClosedData(table_id=table.table_id, round_id=rnd.round_id)
        return [_make(models.BetsClosed, data, f"{rnd.round_id}/closed", event.time)]

    # ---- the cards ----------------------------------------------------------------------------

    def _burn(self, table: Table, event: models.CardsBurn, state: State) -> list[models.Event]:
        indices = event.data.indices
        if not indices:
            raise Rejected("cards.burn names no card")
        if table.round is None:
            table.burns.append(Burn(event.id, event.time, indices))
            return []
        rnd = table.round
        data = models.CardsBurnedData(table_id=table.table_id, shoe_id=rnd.shoe_id, round_id=rnd.round_id, indices=indices)
        return [_make(models.CardsBurned, data, f"{event.id}/burned", event.time)]

    def _card(self, table: Table, event: models.CardPlace, state: State) -> list[models.Event]:
        d = event.data
        rnd = _in_progress(table, "card.place")
        if rnd.holds_index(d.index):
            raise Rejected(f"card.place: card {d.index} of the shoe is already in a hand of round {rnd.round_id}")
        if d.hand == "player":
            rnd.player = (*rnd.player, HandCard(d.index, d.card))
        else:
            rnd.banker = (*rnd.banker, HandCard(d.index, d.card))
        return []

    def _squeeze(self, table: Table, event: models.Squeeze, state: State) -> list[models.Event]:
        _in_progress(table, "squeeze").squeezed_by = event.data.patron_id
        return []

    # ---- the end of a round -------------------------------------------------------------------

    def _result(self, table: Table, event: models.Result, state: State) -> list[models.Event]:
        d = event.data
        rnd = _in_progress(table, "result")
        table.round = None
        rnd.declared = RoundResult(d.player_total, d.banker_total, d.outcome, d.player_pair, d.banker_pair)
        # Art. 12: Player and Banker bets stay on a tie, for the next round.
        table.carried = (
            {bet.bet_id: bet for bet in rnd.bets.values() if not bet.withdrawn and bet.spot in (Spot.PLAYER, Spot.BANKER)}
            if d.outcome == Outcome.TIE
            else {}
        )
        completion = Completion(rnd, event.time)
        if table.waiting:
            table.waiting.append(completion)  # completes after those before it
            return []
        outputs = self._finish(table, completion, state)
        if outputs is None:
            table.waiting.append(completion)
            return []
        return outputs

    def _void(self, table: Table, event: models.RoundVoid, state: State) -> list[models.Event]:
        rnd = _in_progress(table, "round.void")
        table.round, table.carried = None, {}
        return _voided(table.table_id, rnd, event.data.reason, event.time)

    def _finish(self, table: Table, completion: Completion, state: State) -> list[models.Event] | None:
        """The round's completion, its voiding if the shoe ended without reading one of its
        cards, or None while the shoe may still read them."""
        rnd = completion.round
        shoe = state.get(_shoe_key(state, table.table_id, rnd.shoe_id), Shoe) or Shoe(rnd.shoe_id)
        unread = sorted(
            (card.index, hand)
            for hand, cards in (("player", rnd.player), ("banker", rnd.banker))
            for card in cards
            if card.card is None and card.index not in shoe.reads
        )
        if not unread:
            return [_completed(table.table_id, completion, shoe)]
        if not shoe.ended:
            return None
        nothing_since = table.round is None and not completion.then and all(c is completion for c in table.waiting)
        if nothing_since:
            table.carried = {}  # the voided round's bets are returned (Art. 10), not carried
        names = ", ".join(f"{index} ({hand})" for index, hand in unread)
        reason = f"shoe {rnd.shoe_id} ended without reading card {names}, which the hand box did not recognise"
        return _voided(table.table_id, rnd, reason, completion.time)

    # ---- the shoe -----------------------------------------------------------------------------

    def _shoe_started(self, table: Table, event: models.ShoeStarted, state: State) -> list[models.Event]:
        self._reads(table, event.data.shoe_id, state)
        return []

    def _card_read(self, table: Table, event: models.CardRead, state: State) -> list[models.Event]:
        d = event.data
        shoe = self._reads(table, d.shoe_id, state)
        earlier = shoe.reads.get(d.index)
        if earlier is not None and earlier != d.card:
            raise Rejected(f"card.read: shoe {d.shoe_id} read card {d.index} as {earlier} before, now as {d.card}")
        shoe.reads[d.index] = d.card
        return self._release(table, state)

    def _shoe_ended(self, table: Table, event: models.ShoeEnded, state: State) -> list[models.Event]:
        self._reads(table, event.data.shoe_id, state).ended = True
        return self._release(table, state)

    def _reads(self, table: Table, shoe_id: str, state: State) -> Shoe:
        """The shoe's reads, as far as the shoe stream has told them (only ``reads`` and ``ended``
        of the shoe are kept here: judging the cards is the detectors' job)."""
        key = _shoe_key(state, table.table_id, shoe_id)
        shoe = state.get(key, Shoe)
        if shoe is None:
            shoe = Shoe(shoe_id)
            if shoe_id not in table.shoes:
                table.shoes.append(shoe_id)
        state.put(key, shoe)
        return shoe

    def _release(self, table: Table, state: State) -> list[models.Event]:
        """Complete the waiting rounds the shoe has now caught up with, in order, each followed
        by the table events held back behind it."""
        outputs: list[models.Event] = []
        while table.waiting:
            completion = table.waiting[0]
            finished = self._finish(table, completion, state)
            if finished is None:
                break
            outputs += finished
            outputs += [codec.decode(raw) for raw in completion.then]
            table.waiting.pop(0)
        return outputs

    def _forget_shoes_before(self, table: Table, shoe_id: str, state: State) -> None:
        """Drop the reads of the shoes that started before ``shoe_id``, the table's new shoe,
        unless a waiting round still needs them. Shoes read after it are kept: the shoe topic
        may be ahead of the inputs."""
        position = table.shoes.index(shoe_id) if shoe_id in table.shoes else len(table.shoes)
        needed = {completion.round.shoe_id for completion in table.waiting}
        for old in table.shoes[:position]:
            if old not in needed:
                state.delete(_shoe_key(state, table.table_id, old))
        table.shoes = [s for s in table.shoes[:position] if s in needed] + table.shoes[position:]


# ---- helpers --------------------------------------------------------------------------------


def _make(cls: type[models.Event], data: models.Data, event_id: str, time: datetime) -> models.Event:
    return codec.make(cls, data, id=event_id, source=SOURCE, time=time)


def _shoe_key(state: State, table_id: str, shoe_id: str) -> str:
    return state.key("shoe", table_id, shoe_id)


def _in_progress(table: Table, what: str) -> Round:
    if table.round is None:
        raise Rejected(f"{what}: no round is in progress at table {table.table_id}")
    return table.round


def _round_id(table: Table) -> str:
    assert table.round is not None
    return table.round.round_id


def _active_bet(rnd: Round, bet_id: str, what: str) -> Bet:
    bet = rnd.bets.get(bet_id)
    if bet is None:
        raise Rejected(f"{what}: no bet {bet_id} on round {rnd.round_id}")
    if bet.withdrawn:
        raise Rejected(f"{what}: bet {bet_id} on round {rnd.round_id} was withdrawn")
    return bet


def _check_stake(bet_id: str, amount: int) -> None:
    if amount <= 0:
        raise Rejected(f"bet {bet_id}: a stake of {amount} is no bet")


def _completed(table_id: str, completion: Completion, shoe: Shoe) -> models.Event:
    rnd, result = completion.round, completion.round.declared
    assert result is not None
    data = models.RoundCompletedData(
        table_id=table_id,
        shoe_id=rnd.shoe_id,
        round_id=rnd.round_id,
        player=[models.HandCard(c.index, c.card or shoe.reads[c.index]) for c in rnd.player],
        banker=[models.HandCard(c.index, c.card or shoe.reads[c.index]) for c in rnd.banker],
        player_total=result.player_total,
        banker_total=result.banker_total,
        outcome=result.outcome,
        player_pair=result.player_pair,
        banker_pair=result.banker_pair,
        squeezed_by=rnd.squeezed_by,
    )
    return _make(models.RoundCompleted, data, f"{rnd.round_id}/completed", completion.time)


def _voided(table_id: str, rnd: Round, reason: str, time: datetime) -> list[models.Event]:
    """Art. 10: a void round; the cards it had dealt go to the discard (burned)."""
    outputs: list[models.Event] = []
    if rnd.player or rnd.banker:
        burned = models.CardsBurnedData(table_id=table_id, shoe_id=rnd.shoe_id, round_id=rnd.round_id, indices=sorted(rnd.indices()))
        outputs.append(_make(models.CardsBurned, burned, f"{rnd.round_id}/burned", time))
    voided = models.RoundVoidedData(
        table_id=table_id,
        round_id=rnd.round_id,
        reason=reason,
        player=[models.PlacedCard(c.index, c.card) for c in rnd.player],
        banker=[models.PlacedCard(c.index, c.card) for c in rnd.banker],
    )
    outputs.append(_make(models.RoundVoided, voided, f"{rnd.round_id}/voided", time))
    return outputs


_HANDLERS: dict[type[models.Event], Handler] = {
    models.RoundOpen: TableController._open,  # type: ignore[dict-item]
    models.BetPlace: TableController._place,  # type: ignore[dict-item]
    models.BetChange: TableController._change,  # type: ignore[dict-item]
    models.BetWithdraw: TableController._withdraw,  # type: ignore[dict-item]
    models.BetsClose: TableController._close,  # type: ignore[dict-item]
    models.CardsBurn: TableController._burn,  # type: ignore[dict-item]
    models.CardPlace: TableController._card,  # type: ignore[dict-item]
    models.Squeeze: TableController._squeeze,  # type: ignore[dict-item]
    models.Result: TableController._result,  # type: ignore[dict-item]
    models.RoundVoid: TableController._void,  # type: ignore[dict-item]
    models.ShoeStarted: TableController._shoe_started,  # type: ignore[dict-item]
    models.CardRead: TableController._card_read,  # type: ignore[dict-item]
    models.ShoeEnded: TableController._shoe_ended,  # type: ignore[dict-item]
}
