"""Shoe lines signed with the shoe's key: a line without its shoe's signature is refused, uses up
no sequence number (a spoofer cannot silence the real shoe), and its dead letter is marked so
the detectors raise DEVICE_SIGNATURE for the table it claims."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from surveil.detect.devices import signature_finding
from surveil.events import deadletter
from surveil.events.shoe_protocol import BadLine, Kind, Problem, format_line, parse_line, signed_line
from surveil.events.signing import DeviceKeys

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
KEYS = DeviceKeys({"shoe/T07": bytes(range(32)), "shoe/T08": bytes(range(1, 33))})  # each shoe its own key
OTHER = DeviceKeys({"shoe/T07": bytes(32), "shoe/T08": bytes(32)})  # keys no shoe was issued


def card(table: str = "T07", seq: int = 5) -> bytes:
    return format_line(table, seq, NOW, Kind.CARD, "S1", 3, "10H", "down")


def test_a_signed_line_parses_with_the_keys_and_without() -> None:
    line = signed_line(card(), KEYS)
    assert parse_line(line, NOW, KEYS).event.data == parse_line(card(), NOW).event.data
    assert parse_line(line, NOW).event.id == parse_line(card(), NOW).event.id


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (card(), "no signature: every message of shoe/T07 must be signed"),
        (signed_line(card(), OTHER), "the signature is not shoe/T07's: a spoofed or altered message"),
        (signed_line(card("T08"), KEYS).replace(b"T08", b"T07", 1), None),  # moved to another table: CRC fails first
    ],
)
def test_a_line_without_its_shoes_signature_is_refused_and_trusted_for_nothing(line: bytes, reason: str | None) -> None:
    with pytest.raises(BadLine) as refused:
        parse_line(line, NOW, KEYS)
    if reason is None:
        assert refused.value.problem is Problem.CHECKSUM
        return
    assert (refused.value.problem, refused.value.reason) == (Problem.SIGNATURE, reason)
    assert (refused.value.table_id, refused.value.seq, refused.value.claims) == (None, None, "T07")


def test_a_re_checksummed_forgery_of_another_tables_line_is_refused() -> None:
    forged = signed_line(card("T08"), KEYS).decode().replace("T08", "T07", 1).rpartition(" *")[0].encode()
    from surveil.events.shoe_protocol import checksum

    with pytest.raises(BadLine) as refused:
        parse_line(forged + b" *" + checksum(forged).encode() + b"\n", NOW, KEYS)
    assert refused.value.problem is Problem.SIGNATURE


def test_a_line_of_a_shoe_without_a_key_is_refused() -> None:
    with pytest.raises(BadLine) as refused:
        parse_line(signed_line(card("T09"), DeviceKeys({"shoe/T09": bytes(32)})), NOW, KEYS)
    assert (refused.value.problem, refused.value.reason) == (
        Problem.SIGNATURE,
        "no key is issued for shoe/T09: a device of no table this floor knows",
    )


def test_the_dead_letter_of_a_refused_line_becomes_a_device_signature_alert() -> None:
    letter = deadletter.dead_letter(
        "shoe-reader",
        card(),
        "no signature: every message of shoe/T07 must be signed",
        origin="tcp://10.0.0.9:4000",
        key="T07",
        kind=deadletter.SIGNATURE,
    )
    found = signature_finding(letter, "shoe-reader")
    assert found is not None
    assert (found.finding.code, found.finding.article, found.context.table_id) == ("DEVICE_SIGNATURE", "Art. 7", "T07")
    assert "tcp://10.0.0.9:4000" == found.finding.evidence["origin"]
    assert signature_finding(deadletter.dead_letter("shoe-reader", b"x", "garbled", origin="tcp://x", key="T07"), "shoe-reader") is None


def test_who_refused_a_message_is_the_topic_it_came_from_not_what_the_letter_claims() -> None:
    claims = deadletter.dead_letter("table-controller", b"{}", "forged", origin="baccarat.inputs", key="T05", kind=deadletter.SIGNATURE)
    assert signature_finding(claims, "settlement") is None  # on settlement's own topic: settlement checks no signature
    found = signature_finding(claims, "shoe-reader")
    assert found is not None and found.finding.article == "Art. 7" and found.finding.evidence["service"] == "shoe-reader"


def test_refusals_at_one_offset_of_two_partitions_are_two_alerts() -> None:
    def refused(partition: int) -> str:
        letter = deadletter.dead_letter(
            "table-controller",
            b"{}",
            "forged",
            origin="baccarat.inputs",
            key="T05",
            kind=deadletter.SIGNATURE,
            partition=partition,
            offset=41,
        )
        found = signature_finding(letter, "table-controller")
        assert found is not None
        return found.context.scope

    assert refused(0) != refused(3)  # one scope, one alert id: the second alert would be taken for the first
