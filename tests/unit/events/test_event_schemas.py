"""The committed JSON Schemas (``schemas/*.json``) are what the models generate, and they accept the
contract's events and reject broken ones (JSON Schema Draft 2020-12)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from event_samples import event
from jsonschema import Draft202012Validator

from surveil.events.codec import EVENT_TYPES, InvalidEventError, decode
from surveil.events.schemas import render

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"
TYPES = sorted(EVENT_TYPES)
REGENERATE = "regenerate with: .venv/bin/python -m surveil.events.schemas schemas"


def validator(type_name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / f"{type_name}.json").read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def test_there_is_one_committed_schema_per_event_type() -> None:
    assert sorted(path.stem for path in SCHEMAS.glob("*.json")) == TYPES, REGENERATE


@pytest.mark.parametrize("type_name", TYPES)
def test_committed_schema_is_kept_in_sync_with_the_models(type_name: str) -> None:
    """Fails when a model changed and ``schemas/`` was not regenerated."""
    path = SCHEMAS / f"{type_name}.json"
    assert path.is_file(), REGENERATE
    assert path.read_text(encoding="utf-8") == render(type_name), f"{path.name} is stale; {REGENERATE}"


@pytest.mark.parametrize("type_name", TYPES)
def test_schema_names_its_type_and_draft(type_name: str) -> None:
    schema = json.loads((SCHEMAS / f"{type_name}.json").read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] == type_name


@pytest.mark.parametrize("type_name", TYPES)
def test_schema_validates_a_sample_event(type_name: str) -> None:
    validator(type_name).validate(event(type_name))


# Breaks that any event type has, so each schema is shown to reject something.
def _without_table_id(obj: dict[str, Any]) -> None:
    del obj["data"]["table_id" if "table_id" in obj["data"] else "partition"]  # a checkpoint is about a partition


def _unknown_data_field(obj: dict[str, Any]) -> None:
    obj["data"]["surprise"] = 1


def _wrong_type(obj: dict[str, Any]) -> None:
    obj["type"] = "baccarat.something.else"


def _wrong_specversion(obj: dict[str, Any]) -> None:
    obj["specversion"] = "0.3"


def _empty_id(obj: dict[str, Any]) -> None:
    obj["id"] = ""


def _no_data(obj: dict[str, Any]) -> None:
    del obj["data"]


BREAKS = [_without_table_id, _unknown_data_field, _wrong_type, _wrong_specversion, _empty_id, _no_data]


@pytest.mark.parametrize("break_", BREAKS, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("type_name", TYPES)
def test_schema_rejects_a_broken_event(type_name: str, break_: Any) -> None:
    broken = event(type_name)
    break_(broken)
    assert not validator(type_name).is_valid(broken)
    if break_ is not _wrong_type:  # another type name may well be valid for the codec's union
        with pytest.raises(InvalidEventError):
            decode(json.dumps(broken))


# Type-specific breaks: the schema and the codec agree on each.
SPECIFIC = [
    ("baccarat.bet.placed", "amount", -1),
    ("baccarat.bet.placed", "amount", 10.5),
    ("baccarat.bet.placed", "seat", "0"),
    ("baccarat.bet.placed", "seat", "100"),
    ("baccarat.bet.placed", "box", "rail"),
    ("baccarat.round.opened", "seats", 6),
    ("baccarat.bet.placed", "spot", "banco"),
    ("baccarat.card.read", "card", "1H"),
    ("baccarat.card.read", "index", 0),
    ("baccarat.shoe.started", "decks", 5),
    ("baccarat.round.opened", "currency", "hkd"),
    ("baccarat.round.completed", "banker_total", 10),
    ("baccarat.round.completed", "outcome", "draw"),
    ("baccarat.round.completed", "player", [{"index": 1, "card": "XX"}]),
    ("baccarat.bet.settled", "result", "won"),
    ("baccarat.alert.raised", "severity", "fatal"),
    ("baccarat.alert.raised", "signature", "not hex"),
    ("baccarat.alert.checkpoint", "tables", {"T07": {"count": 0, "head": "ab" * 32}}),
    ("baccarat.alert.checkpoint", "partition", -1),
]


@pytest.mark.parametrize(("type_name", "field", "value"), SPECIFIC)
def test_schema_and_codec_reject_the_same_bad_field(type_name: str, field: str, value: Any) -> None:
    broken = event(type_name, **{field: value})
    errors = list(validator(type_name).iter_errors(broken))
    assert errors
    assert any(field in error.json_path for error in errors)
    with pytest.raises(InvalidEventError, match=rf"\$\.data\.{field}"):
        decode(json.dumps(broken))
