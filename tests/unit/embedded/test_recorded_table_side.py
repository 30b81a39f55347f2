"""Simulated shoes through the real table side (shoe-reader parser, table-controller, settlement)
on the in-process bus: every event validates against its JSON Schema, and every round is the one
``core.play.deal`` plays from the same shoe."""

from __future__ import annotations

import json
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from surveil.core.cards import CARDS
from surveil.core.play import deal
from surveil.embedded.record import record
from surveil.events import codec
from surveil.events import models as m
from surveil.sim.floor import Floor

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"


@cache
def validator(type_name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / f"{type_name}.json").read_text(encoding="utf-8"))
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def recorded(floor: Floor) -> list[m.Event]:
    events: list[m.Event] = []
    recording = record(floor, events.append, lambda label: None)
    assert recording.dead_letters == []
    return events


@pytest.fixture(scope="module", params=["dicj", "sjm", "no-commission"])
def events(request: pytest.FixtureRequest) -> list[m.Event]:
    return recorded(Floor(tables=3, shoes=1, seed=11, profile=request.param))


def test_every_event_validates_against_its_schema(events: list[m.Event]) -> None:
    seen = set()
    for event in events:
        type_name = event.__struct_config__.tag  # type: ignore[attr-defined]
        validator(type_name).validate(json.loads(codec.encode(event)))
        seen.add(type_name)
    assert seen >= {
        "baccarat.shoe.started",
        "baccarat.card.read",
        "baccarat.cut_card.reached",
        "baccarat.shoe.ended",
        "baccarat.round.opened",
        "baccarat.bet.placed",
        "baccarat.bet.changed",
        "baccarat.bet.withdrawn",
        "baccarat.bets.closed",
        "baccarat.cards.burned",
        "baccarat.round.completed",
        "baccarat.bet.settled",
        "baccarat.round.settled",
    }


def test_event_ids_are_unique(events: list[m.Event]) -> None:
    ids = [event.id for event in events]
    assert len(ids) == len(set(ids))


def test_every_round_is_what_deal_plays_from_the_same_shoe(events: list[m.Event]) -> None:
    reads: dict[tuple[str, str], dict[int, str]] = defaultdict(dict)
    completed = []
    for event in events:
        if isinstance(event, m.CardRead):
            reads[(event.subject, event.data.shoe_id)][event.data.index] = event.data.card
        elif isinstance(event, m.RoundCompleted):
            completed.append(event.data)
    assert len(completed) > 150
    for c in completed:
        shoe = reads[(c.table_id, c.shoe_id)]
        first = min(card.index for card in (*c.player, *c.banker))
        coup = deal([CARDS[shoe[i]] for i in range(first, first + 6) if i in shoe])
        assert [h.card for h in c.player] == [card.code for card in coup.player], c.round_id
        assert [h.card for h in c.banker] == [card.code for card in coup.banker], c.round_id
        assert [h.index for h in c.player] == [first, first + 2, *([first + 4] if len(coup.player) == 3 else [])]
        result = coup.result
        assert (c.player_total, c.banker_total, c.outcome, c.player_pair, c.banker_pair) == (
            result.player_total,
            result.banker_total,
            result.outcome,
            result.player_pair,
            result.banker_pair,
        )


def test_every_bet_is_settled_once_and_every_round_settled(events: list[m.Event]) -> None:
    ended = {e.data.round_id for e in events if isinstance(e, (m.RoundCompleted, m.RoundVoided))}
    settled_rounds = [e.data.round_id for e in events if isinstance(e, m.RoundSettled)]
    assert sorted(settled_rounds) == sorted(ended)
    settled_bets = [(e.data.round_id, e.data.bet_id) for e in events if isinstance(e, m.BetSettled)]
    assert len(settled_bets) == len(set(settled_bets))
