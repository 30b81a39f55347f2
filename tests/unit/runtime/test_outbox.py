"""The Kafka runner's outbox as Redis keeps it: each input partition's outputs, with the
partition's place in its batch (recovery publishes the outboxes of a batch in that order)."""

from __future__ import annotations

import msgspec

from surveil.runtime.kafka import _outbox, _stored_outbox

OUTPUTS = [("baccarat.table", b"T001", b"{}"), ("baccarat.deadletter.table-controller", b"T001", b"[]")]


def test_an_outbox_is_read_back_with_its_place_in_the_batch() -> None:
    assert _outbox(_stored_outbox(3, OUTPUTS)) == (3, OUTPUTS)


def test_an_outbox_left_by_0_1_0_has_no_place_and_goes_first() -> None:
    assert _outbox(msgspec.msgpack.encode(OUTPUTS)) == (0, OUTPUTS)


def test_no_outbox_is_nothing_to_publish() -> None:
    assert _outbox(None) == (0, [])
