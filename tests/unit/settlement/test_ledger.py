"""The ledger: its keys, the shift arithmetic (Macau time, three shifts from 07:00), the totals per
table shift and patron, and the read side."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from settlement_desk import SHIFT, Desk

from surveil.core.money import BetResult, Spot
from surveil.core.play import Outcome
from surveil.events import models as m
from surveil.runtime.processor import Rejected
from surveil.runtime.state import MemoryBackend, State
from surveil.settlement import ledger
from surveil.settlement.ledger import MACAU, PatronTotals, RoundRecord, TableTotals, shift_of
from surveil.settlement.processor import SettlementProcessor


@pytest.mark.parametrize(
    ("macau_time", "shift"),
    [
        ("2026-11-29 07:00:00", "2026-11-29/1"),
        ("2026-11-29 14:59:59", "2026-11-29/1"),
        ("2026-11-29 15:00:00", "2026-11-29/2"),
        ("2026-11-29 22:59:59", "2026-11-29/2"),
        ("2026-11-29 23:00:00", "2026-11-29/3"),
        ("2026-11-30 00:00:00", "2026-11-29/3"),  # after midnight: still the night shift of the 29th
        ("2026-11-30 06:59:59", "2026-11-29/3"),
        ("2026-11-30 07:00:00", "2026-11-30/1"),
        ("2026-12-31 23:30:00", "2026-12-31/3"),
        ("2027-01-01 03:00:00", "2026-12-31/3"),  # the year's last night shift ends in the next year
    ],
)
def test_shift_of_a_moment_in_macau_time(macau_time: str, shift: str) -> None:
    moment = datetime.fromisoformat(macau_time).replace(tzinfo=MACAU)
    assert shift_of(moment) == shift
    assert shift_of(moment.astimezone(UTC)) == shift  # the same moment in UTC


def test_shifts_are_eight_hours_and_follow_each_other() -> None:
    start = datetime(2026, 11, 29, 7, 0, tzinfo=MACAU)
    hours = [shift_of(start + timedelta(hours=h)) for h in range(48)]
    assert [hours[h] for h in (0, 8, 16, 24, 32, 40)] == [
        "2026-11-29/1",
        "2026-11-29/2",
        "2026-11-29/3",
        "2026-11-30/1",
        "2026-11-30/2",
        "2026-11-30/3",
    ]
    assert all(hours.count(shift) == 8 for shift in set(hours))


def test_the_ledger_keys_of_one_round(desk: Desk) -> None:
    desk.send(
        desk.open("R1"),
        desk.bet("R1", "B1", Spot.BANKER, 1_000, patron="P1"),
        desk.bet("R1", "B2", Spot.PLAYER, 500, patron="P2"),
        desk.bet("R1", "B3", Spot.TIE, 100, patron="P2"),
        desk.complete("R1", Outcome.TIE),
    )
    assert sorted(desk.backend.data) == [
        "settlement:bet:T07:R1:B1",
        "settlement:bet:T07:R1:B2",
        "settlement:bet:T07:R1:B3",
        "settlement:carried:T07",  # B1 and B2 wait for the next round
        "settlement:round:T07:R1",
    ]
    assert {key: values for key, values in desk.backend.hashes.items()} == {
        f"settlement:table:T07:{SHIFT}": {"staked": 100, "paid_out": 900, "commission": 0, "house_net": -800, "rounds": 1, "bets": 1},
        "settlement:table:T07": {SHIFT: 1},
        f"settlement:shift:{SHIFT}:tables": {"T07": 1},
        f"settlement:shift:{SHIFT}:rounds:T07": {"R1": 3},
        "settlement:shifts": {SHIFT: 1},
        f"settlement:patron:P2:{SHIFT}": {"staked": 100, "paid_out": 900, "commission": 0, "net": 800, "bets": 1, "wins": 1},
        "settlement:patron:P2": {SHIFT: 1},
        f"settlement:shift:{SHIFT}:patrons": {"P2": 1},
    }
    record = desk.ledger.round("T07", "R1")
    assert record == RoundRecord(
        table_id="T07",
        round_id="R1",
        shift=SHIFT,
        time=record.time,  # type: ignore[union-attr]
        outcome="tie",
        staked=100,
        paid_out=900,
        commission=0,
        house_net=-800,
        bet_ids=["B1", "B2", "B3"],
    )
    assert desk.ledger.bet("T07", "R1", "B1").result is BetResult.CARRIED  # type: ignore[union-attr]
    # The carried bets leave the table's waiting list when the next round takes them.
    desk.send(desk.open("R2", carried=("B1", "B2")))
    assert "settlement:carried:T07" not in desk.backend.data


def test_a_round_belongs_to_the_shift_in_which_it_ended(desk: Desk) -> None:
    before_23 = datetime(2026, 11, 29, 22, 59, tzinfo=MACAU)
    desk.send(desk.open("R1", at=before_23), desk.bet("R1", "B1", Spot.BANKER, 2_000), desk.complete("R1", Outcome.TIE))
    desk.send(desk.open("R2", carried=("B1",)), desk.complete("R2", Outcome.BANKER, at=before_23 + timedelta(minutes=2)))
    desk.send(desk.open("R3"), desk.bet("R3", "B2", Spot.PLAYER, 300), desk.complete("R3", Outcome.BANKER))
    assert desk.ledger.table_shifts("T07") == {
        "2026-11-29/2": TableTotals(rounds=1),
        "2026-11-29/3": TableTotals(staked=2_300, paid_out=3_900, commission=100, house_net=-1_600, rounds=2, bets=2),
    }
    assert desk.ledger.patron_shifts("P1") == {
        "2026-11-29/3": PatronTotals(staked=2_300, paid_out=3_900, commission=100, net=1_600, bets=2, wins=1, losses=1)
    }
    assert desk.ledger.shifts() == ["2026-11-29/2", "2026-11-29/3"]


def test_the_house_result_is_what_was_staked_less_what_was_paid(desk: Desk) -> None:
    for n, outcome in enumerate([Outcome.BANKER, Outcome.PLAYER, Outcome.TIE, Outcome.BANKER], 1):
        carried = ("B1-1", "B1-2") if n == 4 else ()
        desk.send(
            desk.open(f"R{n}", carried=carried),
            desk.bet(f"R{n}", f"B{n}-1", Spot.BANKER, 1_100, patron="P1"),
            desk.bet(f"R{n}", f"B{n}-2", Spot.PLAYER, 700, patron="P2"),
            desk.bet(f"R{n}", f"B{n}-3", Spot.PLAYER_PAIR, 200, patron="P3"),
            desk.complete(f"R{n}", outcome, player_pair=n == 2),
        )
    table = desk.ledger.table("T07", SHIFT)
    patrons = [desk.ledger.patron(p, SHIFT) for p in ("P1", "P2", "P3")]
    assert table.house_net == table.staked - table.paid_out
    assert table.house_net == -sum(p.net for p in patrons)
    assert (table.staked, table.paid_out, table.commission) == (
        sum(p.staked for p in patrons),
        sum(p.paid_out for p in patrons),
        sum(p.commission for p in patrons),
    )
    assert table.bets == sum(p.bets for p in patrons) == 10  # 12 placed, 2 carried into R4 and decided there


def test_a_shift_read_back_whole(desk: Desk) -> None:
    desk.send(desk.open("R1"), desk.bet("R1", "B1", Spot.BANKER, 1_000), desk.complete("R1", Outcome.BANKER))
    whole = desk.ledger.shift(SHIFT)
    assert whole.tables == {"T07": desk.ledger.table("T07", SHIFT)}
    assert whole.patrons == {"P1": PatronTotals(staked=1_000, paid_out=1_950, commission=50, net=950, bets=1, wins=1)}
    assert list(whole.rounds) == [("T07", "R1")]
    assert list(whole.bets) == [("T07", "R1", "B1")]
    assert desk.ledger.shift("2026-11-30/1") == ledger.ShiftLedger("2026-11-30/1", {}, {}, {}, {})


def test_totals_add_field_by_field() -> None:
    a = PatronTotals(staked=100, paid_out=195, commission=5, net=95, bets=1, wins=1)
    b = PatronTotals(staked=300, net=-300, bets=1, losses=1)
    assert ledger.add(a, b) == PatronTotals(staked=400, paid_out=195, commission=5, net=-205, bets=2, wins=1, losses=1)


def test_nothing_in_the_ledger_reads_as_zero(desk: Desk) -> None:
    assert desk.ledger.table("T99", SHIFT) == TableTotals()
    assert desk.ledger.patron_shifts("nobody") == {}
    assert desk.ledger.round("T99", "R1") is None
    assert desk.ledger.bet("T99", "R1", "B1") is None


class CountingBackend(MemoryBackend):
    def __init__(self) -> None:
        super().__init__()
        self.round_trips = 0

    def read(self, key: str) -> bytes | None:
        self.round_trips += 1
        return super().read(key)

    def read_many(self, keys: list[str]) -> list[bytes | None]:
        self.round_trips += 1
        return super().read_many(keys)


def test_prefetch_reads_what_a_batch_needs_in_one_round_trip() -> None:
    """The Kafka runner calls prefetch with each batch: the batch then makes no read of its own."""
    desk, backend = Desk(), CountingBackend()
    processor = SettlementProcessor()
    first = [desk.open("R1"), desk.bet("R1", "B1", Spot.BANKER, 1_000), desk.complete("R1", Outcome.TIE)]
    second = [
        desk.open("R2", carried=("B1",)),
        desk.bet("R2", "B2", Spot.PLAYER, 500),
        desk.complete("R2", Outcome.BANKER),
        desk.open("R1"),
    ]  # a duplicate: refused from what was prefetched
    published = []
    for batch in (first, second):
        state = State(backend, "settlement")
        processor.prefetch(batch, state)
        before = backend.round_trips
        for event in batch:
            try:
                published += processor.process(event, state)
            except Rejected:
                pass
        assert backend.round_trips == before
        state.commit()
    assert [e.data.net for e in published if isinstance(e, m.BetSettled)] == [0, 950, -500]  # type: ignore[attr-defined]
