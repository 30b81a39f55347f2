"""What cannot be settled goes to the dead-letter topic with its reason and is counted; it never
changes the ledger and never stops settlement. Duplicates with new offsets are refused here (the
runner's Redis transaction handles redelivery of the same offsets)."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest
from settlement_desk import SHIFT, Desk

from surveil.core import profiles
from surveil.core.money import BetResult, Spot
from surveil.core.play import Outcome
from surveil.events import codec
from surveil.events import models as m
from surveil.settlement import metrics
from surveil.settlement.ledger import TableTotals

Case = Callable[[Desk], tuple[list[m.Event], m.Event]]  # (accepted events, the bad one)


def _bet_on_unknown_round(d: Desk) -> tuple[list[m.Event], m.Event]:
    return [d.open("R1")], d.bet("R9", "B1", Spot.PLAYER, 1_000)


def _bet_placed_twice(d: Desk) -> tuple[list[m.Event], m.Event]:
    placed = d.bet("R1", "B1", Spot.PLAYER, 1_000)
    return [d.open("R1"), placed], d.event(m.BetPlaced, placed.data)  # the same bet, a new event


def _unknown_bet_changed(d: Desk) -> tuple[list[m.Event], m.Event]:
    return [d.open("R1"), d.bet("R1", "B1", Spot.PLAYER, 1_000)], d.change("R1", "B2", Spot.BANKER, 1_000)


def _unknown_bet_withdrawn(d: Desk) -> tuple[list[m.Event], m.Event]:
    return [d.open("R1"), d.bet("R1", "B1", Spot.PLAYER, 1_000)], d.withdraw("R1", "B2")


def _round_opened_twice(d: Desk) -> tuple[list[m.Event], m.Event]:
    return [d.open("R1"), d.bet("R1", "B1", Spot.PLAYER, 1_000)], d.open("R1")


def _zero_stake(d: Desk) -> tuple[list[m.Event], m.Event]:
    return [d.open("R1")], d.bet("R1", "B1", Spot.PLAYER, 0)


def _changed_to_zero(d: Desk) -> tuple[list[m.Event], m.Event]:
    return [d.open("R1"), d.bet("R1", "B1", Spot.PLAYER, 1_000)], d.change("R1", "B1", Spot.PLAYER, 0)


def _completed_never_opened(d: Desk) -> tuple[list[m.Event], m.Event]:
    return [d.open("R1")], d.complete("R9", Outcome.PLAYER)


def _round_id_of_another_table(d: Desk) -> tuple[list[m.Event], m.Event]:
    return [d.open("R1"), d.bet("R1", "B1", Spot.PLAYER, 1_000)], Desk("T08").complete("R1", Outcome.PLAYER)


def _subject_is_not_the_table(d: Desk) -> tuple[list[m.Event], m.Event]:
    bet = d.bet("R1", "B1", Spot.PLAYER, 1_000)
    return [d.open("R1")], msgspec.structs.replace(bet, subject="T08")


# (case, kind, reason): settlement goes on with R1 open and B1 on it, where the case placed it.
OPEN_ROUND_CASES: dict[str, tuple[Case, str, str]] = {
    "bet on an unknown round": (_bet_on_unknown_round, "unknown", "unknown round R9 at T07"),
    "bet placed twice": (_bet_placed_twice, "duplicate", "bet B1 was already placed on round R1"),
    "unknown bet changed": (_unknown_bet_changed, "unknown", "unknown bet B2 on round R1"),
    "unknown bet withdrawn": (_unknown_bet_withdrawn, "unknown", "unknown bet B2 on round R1"),
    "round opened twice": (_round_opened_twice, "duplicate", "round R1 at T07 was already opened"),
    "stake of zero": (_zero_stake, "invalid", "bet B1: a stake of 0 cannot be settled"),
    "changed to zero": (_changed_to_zero, "invalid", "bet B1: a stake of 0 cannot be settled"),
    "round completed that never opened": (_completed_never_opened, "unknown", "unknown round R9 at T07"),
    "a round id of another table": (_round_id_of_another_table, "unknown", "unknown round R1 at T08"),
    "subject is not the table": (_subject_is_not_the_table, "invalid", "subject T08 is not its table T07"),
}


def rejections(kind: str) -> float:
    return metrics.REJECTIONS.labels(kind)._value.get()


@pytest.mark.parametrize("name", OPEN_ROUND_CASES)
def test_what_cannot_be_settled_is_dead_lettered_counted_and_changes_nothing(desk: Desk, name: str) -> None:
    case, kind, reason = OPEN_ROUND_CASES[name]
    accepted, bad = case(desk)
    assert desk.send(*accepted) == []
    before, counted = desk.snapshot(), rejections(kind)

    assert desk.send(bad) == []
    assert desk.snapshot() == before
    assert len(desk.bus.dead_letters) == 1
    assert reason in desk.bus.dead_letters[0].reason
    assert desk.bus.dead_letters[0].payload == codec.encode(bad)
    assert rejections(kind) == counted + 1

    # Settlement goes on: the round still settles as if the bad event had never come.
    if not accepted:
        desk.send(desk.open("R1"))
    published = desk.send(desk.complete("R1", Outcome.PLAYER))
    assert published[-1].data.round_id == "R1"  # type: ignore[attr-defined]
    assert desk.ledger.table("T07", SHIFT).rounds == 1


@pytest.mark.parametrize(
    ("ending", "again"),
    [
        ("complete", "complete"),  # a round completed twice
        ("complete", "void"),  # voided after it was paid
        ("void", "complete"),
        ("void", "void"),
    ],
)
def test_a_round_is_settled_once_whatever_ends_it_again(desk: Desk, ending: str, again: str) -> None:
    end = {"complete": lambda: desk.complete("R1", Outcome.BANKER), "void": lambda: desk.void("R1")}
    first = desk.send(desk.open("R1"), desk.bet("R1", "B1", Spot.BANKER, 1_000), end[ending]())
    assert len(first) == 2
    before, counted = desk.snapshot(), rejections("duplicate")
    assert desk.send(end[again]()) == []
    assert desk.snapshot() == before
    assert desk.bus.dead_letters[-1].reason == "round R1 at T07 was already settled"
    assert rejections("duplicate") == counted + 1


def test_the_same_completion_event_delivered_twice_pays_once(desk: Desk) -> None:
    completed = desk.complete("R1", Outcome.PLAYER)
    desk.send(desk.open("R1"), desk.bet("R1", "B1", Spot.PLAYER, 1_000), completed)
    assert desk.send(completed) == []
    assert desk.ledger.table("T07", SHIFT) == TableTotals(staked=1_000, paid_out=2_000, house_net=-1_000, rounds=1, bets=1)


@pytest.mark.parametrize(
    "late",
    [
        lambda d: d.open("R1"),  # reopened after it was paid: its bets could be paid again
        lambda d: d.bet("R1", "B2", Spot.PLAYER, 1_000),
        lambda d: d.change("R1", "B1", Spot.PLAYER, 5_000),
        lambda d: d.withdraw("R1", "B1"),
    ],
)
def test_nothing_reaches_a_round_once_it_is_settled(desk: Desk, late: Callable[[Desk], m.Event]) -> None:
    desk.send(desk.open("R1"), desk.bet("R1", "B1", Spot.PLAYER, 1_000), desk.complete("R1", Outcome.PLAYER))
    before = desk.snapshot()
    assert desk.send(late(desk)) == []
    assert desk.snapshot() == before
    assert "R1" in desk.bus.dead_letters[-1].reason


def test_a_spot_the_house_does_not_offer_cannot_be_settled(desk: Desk, monkeypatch: pytest.MonkeyPatch) -> None:
    no_side_bets = msgspec.structs.replace(profiles.load_profile("dicj"), name="plain", side_bets=frozenset())
    monkeypatch.setattr("surveil.settlement.processor.load_profile", lambda name: no_side_bets)
    desk.send(desk.open("R1"), desk.bet("R1", "B1", Spot.PLAYER, 1_000))
    before = desk.snapshot()
    assert desk.send(desk.bet("R1", "B2", Spot.TIE, 1_000), desk.change("R1", "B1", Spot.PLAYER_PAIR, 1_000)) == []
    assert desk.snapshot() == before
    assert [letter.reason for letter in desk.bus.dead_letters] == [
        "bet B2: the plain house does not offer tie bets (Art. 13)",
        "bet B1: the plain house does not offer player_pair bets (Art. 13)",
    ]


def test_bad_input_in_one_table_does_not_hold_up_another(desk: Desk) -> None:
    other = Desk("T08")
    published = desk.send(
        desk.open("R1"),
        desk.bet("R1", "B1", Spot.PLAYER, 1_000),
        other.bet("R5", "B7", Spot.PLAYER, 1_000),  # T08 never opened R5
        desk.complete("R1", Outcome.PLAYER),
    )
    assert [e.data.result for e in published if isinstance(e, m.BetSettled)] == [BetResult.WIN]
    assert len(desk.bus.dead_letters) == 1
