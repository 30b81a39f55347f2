"""The contract's handling of hostile bytes: a signature of any characters is a reason to refuse,
never an exception; a dead letter of any payload fits under the broker's maximum record size."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import event_samples as samples
import msgspec
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from surveil.events import codec, deadletter, topics
from surveil.events.signing import DeviceKeys, Refused
from surveil.runtime.config import Settings
from surveil.runtime.kafka import producer_config

BROKER_MAXIMUM = 1_048_576  # message.max.bytes of ops/stack.sh and docker-compose.yml


@pytest.mark.parametrize("header", [b"\xff\xfe", "é".encode(), b"\x00" * 64, b"\xed\xa0\x80"])
def test_a_signature_header_of_any_bytes_is_a_reason_to_refuse_not_an_exception(header: bytes) -> None:
    """The Kafka runner decoded the header with replacement characters; ``hmac.compare_digest``
    raised TypeError for non-ASCII text, and the table-controller exited. The header's bytes
    (the runner's path) and their text (the shoe-reader's) are both refused with a reason."""
    keys = DeviceKeys({"console/T01": b"k" * 32})
    problem = keys.problem("console/T01", b"{}", header.decode(errors="replace"))
    assert problem is not None and "console/T01" in problem
    with pytest.raises(Refused, match="console/T01"):
        keys.counter("console/T01", b"{}", header)


@pytest.mark.parametrize("size", [0, 1000, 700_000, 786_000, BROKER_MAXIMUM])
def test_a_dead_letter_of_any_payload_fits_under_the_brokers_maximum(size: int) -> None:
    """Whole when it fits; else its digest, its size and as much of its start as fits."""
    payload = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    letter = deadletter.dead_letter("settlement", payload, "r" * 100_000, origin="baccarat.table", key="T" * 100_000)
    encoded = deadletter.encode(letter)
    key = deadletter.record_key(b"T" * 100_000)
    # What the producer checks against max.request.size before it sends (and the broker's limit).
    assert DefaultRecordBatchBuilder.estimate_size_in_bytes(key, encoded, []) <= BROKER_MAXIMUM
    back = deadletter.decode(encoded)
    assert back.payload_bytes == size and back.payload_sha256 == hashlib.sha256(payload).hexdigest()
    assert payload.startswith(back.payload) and len(back.payload) >= min(size, 700_000)
    assert back.complete == (back.payload == payload)
    assert back.complete == (size <= 700_000)
    assert back.reason and back.key


def test_the_broker_is_configured_with_the_maximum_the_dead_letters_are_sized_for() -> None:
    root = Path(__file__).resolve().parents[3]
    assert f"message.max.bytes={topics.MAX_RECORD_BYTES}\n" in (root / "ops" / "stack.sh").read_text()
    assert f"KAFKA_MESSAGE_MAX_BYTES: {topics.MAX_RECORD_BYTES}\n" in (root / "docker-compose.yml").read_text()
    assert producer_config(Settings.from_env("settlement"))["max_request_size"] == topics.MAX_RECORD_BYTES
    assert BROKER_MAXIMUM == topics.MAX_RECORD_BYTES


@pytest.mark.parametrize("profile", ["p" * 251, "../profiles/sjm", "sjm/../sjm", "\x00"])
def test_a_round_opened_naming_no_shipped_profile_is_an_invalid_event_whatever_the_name(profile: str) -> None:
    """The profile's name made a file path: a name of 251 characters raised OSError (file name too
    long) from the decoder, where only InvalidEventError is expected, and crashed the runner."""
    raw = json.loads(codec.encode(samples.event("baccarat.round.opened")))
    raw["data"]["profile"] = profile
    with pytest.raises(codec.InvalidEventError, match="no house profile"):
        codec.decode(json.dumps(raw).encode())


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_json_nested_too_deeply_is_an_invalid_event_or_no_dead_letter_not_a_recursion_error(depth: int) -> None:
    """msgspec raises RecursionError for JSON nested deeper than it recurses; the fuzzing found
    the detectors logging it as an internal error, and the shoe-reader's start, which reads past
    records not its own, stopped on it."""
    nested = b'{"a":' * depth + b"1" + b"}" * depth
    with pytest.raises(codec.InvalidEventError, match="nested too deeply|depth"):
        codec.decode(nested)
    with pytest.raises(msgspec.DecodeError):
        deadletter.decode(nested)
