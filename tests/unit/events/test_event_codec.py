"""The event contract v1: every type round-trips through ``encode``/``decode``; invalid input raises
``InvalidEventError`` naming the field at fault."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from event_samples import DATA, TABLE, event

from surveil.events import models
from surveil.events.codec import EVENT_TYPES, TOPICS, InvalidEventError, decode, encode, make

TYPES = sorted(EVENT_TYPES)


def raw(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode()


def test_every_event_type_has_a_sample() -> None:
    assert set(DATA) == set(EVENT_TYPES)


def test_every_event_type_of_docs_contract_md_is_in_the_models() -> None:
    contract = {
        "baccarat.shoe.started", "baccarat.card.read", "baccarat.cut_card.reached", "baccarat.shoe.ended",
        "baccarat.round.opened", "baccarat.bet.placed", "baccarat.bet.changed", "baccarat.bet.withdrawn",
        "baccarat.bets.closed", "baccarat.cards.burned", "baccarat.round.completed", "baccarat.round.voided",
        "baccarat.bet.settled", "baccarat.round.settled", "baccarat.alert.raised", "baccarat.alert.checkpoint",
    }  # fmt: skip
    assert contract <= set(EVENT_TYPES)
    assert {"baccarat.shoe", "baccarat.table", "baccarat.settlement", "baccarat.alerts"} <= set(TOPICS)


@pytest.mark.parametrize("type_name", TYPES)
def test_every_event_type_round_trips(type_name: str) -> None:
    sample = event(type_name)
    decoded = decode(raw(sample))
    assert type(decoded) is EVENT_TYPES[type_name]
    assert type(decoded).topic in TOPICS
    assert json.loads(encode(decoded)) == sample  # nothing lost, nothing added
    assert decode(encode(decoded)) == decoded
    assert decode(json.dumps(sample)) == decoded  # str input too


@pytest.mark.parametrize("type_name", TYPES)
def test_make_fills_the_cloudevents_envelope(type_name: str) -> None:
    decoded = decode(raw(event(type_name)))
    data = decoded.data  # type: ignore[attr-defined]
    about_a_table = hasattr(data, "table_id")  # all but a checkpoint, whose subject is its partition
    made = make(
        EVENT_TYPES[type_name],
        data,
        id=decoded.id,
        source=decoded.source,
        time=datetime(2026, 11, 29, 11, 0, tzinfo=UTC),
        subject=None if about_a_table else decoded.subject,
    )
    assert made == decoded
    assert made.subject == TABLE  # the table id (the sample's, for a checkpoint)


def test_the_envelope_may_carry_cloudevents_extensions() -> None:
    sample = {**event("baccarat.bets.closed"), "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    assert isinstance(decode(raw(sample)), models.BetsClosed)


def change(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set ``value`` at a dotted path (``data.player.1.index``); ``...`` deletes it."""

    def apply(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = obj
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if value is ...:
            del target[last]
        else:
            target[int(last) if isinstance(target, list) else last] = value

    return apply


# (event type, mutation, what the message must contain)
INVALID: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("baccarat.bet.placed", change("data.amount", -1), "`$.data.amount`"),
    ("baccarat.bet.placed", change("data.amount", 100.5), "`$.data.amount`"),  # money is integer
    ("baccarat.bet.placed", change("data.amount", "100"), "`$.data.amount`"),
    ("baccarat.bet.placed", change("data.seat", "0"), "`$.data.seat`"),  # seats are 1, 2, ... (Art. 1: seven or more)
    ("baccarat.bet.placed", change("data.seat", "100"), "`$.data.seat`"),
    ("baccarat.bet.placed", change("data.seat", "07"), "`$.data.seat`"),
    ("baccarat.bet.placed", change("data.box", "0"), "`$.data.box`"),
    ("baccarat.bet.placed", change("data.box", "rail"), "`$.data.box`"),
    ("baccarat.round.opened", change("data.seats", 6), "`$.data.seats`"),
    ("baccarat.round.opened", change("data.seats", 100), "`$.data.seats`"),
    ("baccarat.bet.placed", change("data.spot", "banco"), "`$.data.spot`"),
    ("baccarat.bet.placed", change("data.bet_id", ...), "missing required field `bet_id` - at `$.data`"),
    ("baccarat.bet.placed", change("data.bet_id", ""), "`$.data.bet_id`"),
    ("baccarat.bet.placed", change("data.odds", 2), "unknown field `odds` - at `$.data`"),
    ("baccarat.card.read", change("data.card", "1H"), "`$.data.card`"),
    ("baccarat.card.read", change("data.card", "as"), "`$.data.card`"),
    ("baccarat.card.read", change("data.index", 0), "`$.data.index`"),
    ("baccarat.shoe.started", change("data.decks", 5), "`$.data.decks`"),
    ("baccarat.shoe.started", change("data.decks", 13), "`$.data.decks`"),
    ("baccarat.shoe.started", change("data.automatic", "no"), "`$.data.automatic`"),
    ("baccarat.round.opened", change("data.currency", "hkd"), "`$.data.currency`"),
    ("baccarat.round.opened", change("data.round_no", 0), "`$.data.round_no`"),
    ("baccarat.round.opened", change("data.profile", "lisboa-special"), "no house profile 'lisboa-special'"),  # no rules to check it by
    ("baccarat.round.completed", change("data.player.1.index", 0), "`$.data.player[1].index`"),
    ("baccarat.round.completed", change("data.banker.2.card", "ZZ"), "`$.data.banker[2].card`"),
    ("baccarat.round.completed", change("data.banker.0.face", "up"), "unknown field `face` - at `$.data.banker[0]`"),
    ("baccarat.round.completed", change("data.player_total", 10), "`$.data.player_total`"),
    ("baccarat.round.completed", change("data.outcome", "draw"), "`$.data.outcome`"),
    ("baccarat.bet.settled", change("data.result", "won"), "`$.data.result`"),
    ("baccarat.bet.settled", change("data.commission", -5), "`$.data.commission`"),
    ("baccarat.alert.raised", change("data.severity", "fatal"), "`$.data.severity`"),
    ("baccarat.alert.action", change("data.reason", ...), "reason goes with a close action"),  # a close says why
    ("baccarat.alert.action", change("data.reason", "tired"), "`$.data.reason`"),
    ("baccarat.alert.action", change("data.action", "delete"), "`$.data.action`"),
    ("baccarat.alert.action", change("data.role", "root"), "`$.data.role`"),
    ("baccarat.alert.action", change("data.user", ...), "missing required field `user` - at `$.data`"),
    ("baccarat.bets.closed", change("specversion", "0.3"), "`$.specversion`"),
    ("baccarat.bets.closed", change("id", ""), "`$.id`"),
    ("baccarat.bets.closed", change("source", ...), "missing required field `source`"),
    ("baccarat.bets.closed", change("datacontenttype", "text/plain"), "`$.datacontenttype`"),
    ("baccarat.bets.closed", change("time", "2026-11-29T11:00:00"), "`$.time`"),  # no time zone
    ("baccarat.bets.closed", change("time", "yesterday"), "`$.time`"),
    ("baccarat.bets.closed", change("type", "baccarat.bets.opened"), "`$.type`"),
    ("baccarat.bets.closed", change("data", ...), "missing required field `data`"),
    ("baccarat.bets.closed", change("data.table_id", ...), "missing required field `table_id` - at `$.data`"),
]


@pytest.mark.parametrize(("type_name", "mutate", "message"), INVALID, ids=[m for _, _, m in INVALID])
def test_invalid_events_raise_invalid_event_error_naming_the_field(
    type_name: str, mutate: Callable[[dict[str, Any]], None], message: str
) -> None:
    broken = event(type_name)
    mutate(broken)
    with pytest.raises(InvalidEventError) as error:
        decode(raw(broken))
    assert message in str(error.value)


@pytest.mark.parametrize("payload", [b"", b"not json", b"[]", b"{", b'{"type": 7}', b"null"])
def test_bytes_that_are_not_an_event_raise_invalid_event_error(payload: bytes) -> None:
    with pytest.raises(InvalidEventError):
        decode(payload)


def test_invalid_event_error_is_a_value_error() -> None:
    assert issubclass(InvalidEventError, ValueError)


def test_a_round_voided_may_name_its_hands_and_an_older_one_without_them_still_decodes() -> None:
    older = decode(raw(event("baccarat.round.voided")))
    assert (older.data.player, older.data.banker) == (None, None)  # type: ignore[attr-defined]
    sample = event("baccarat.round.voided")
    sample["data"] |= {"player": [{"index": 9, "card": "2S"}, {"index": 11, "card": None}], "banker": [{"index": 10, "card": "KD"}]}
    decoded = decode(raw(sample))
    assert decoded.data.player == [models.PlacedCard(9, "2S"), models.PlacedCard(11, None)]  # type: ignore[attr-defined]
    assert json.loads(encode(decoded)) == sample
    sample["data"]["banker"] = [{"index": 0, "card": "KD"}]
    with pytest.raises(InvalidEventError, match=r"\$\.data\.banker\[0\]\.index"):
        decode(raw(sample))


def test_seats_and_boxes_past_seven_are_valid_and_older_events_without_them_decode() -> None:
    """Art. 1: a table has seven seats or more; Art. 15: a bet says the box its chips lie in."""
    placed = event("baccarat.bet.placed")
    assert "box" not in placed["data"] and decode(raw(placed)).data.box is None  # type: ignore[attr-defined]
    placed["data"] |= {"seat": "12", "box": "standing"}
    assert decode(raw(placed)).data.box == "standing"  # type: ignore[attr-defined]
    placed["data"] |= {"seat": "standing", "box": "14"}
    assert json.loads(encode(decode(raw(placed)))) == placed
    opened = event("baccarat.round.opened")
    assert decode(raw(opened)).data.seats is None  # type: ignore[attr-defined]
    opened["data"]["seats"] = 14
    assert decode(raw(opened)).data.seats == 14  # type: ignore[attr-defined]
