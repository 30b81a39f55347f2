"""The shoe line protocol v1 (docs/shoe-protocol.md): every line form parses to its event, and every
garbled form is rejected with its precise reason, never guessed at."""

from __future__ import annotations

import doctest
import zlib
from datetime import UTC, datetime

import pytest

from surveil.events import models as m
from surveil.events import shoe_protocol as protocol
from surveil.events.shoe_protocol import BadLine, Kind, Problem, format_line, parse_line

RECEIVED = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
AT = datetime(2026, 11, 29, 11, 0, 5, 120000, tzinfo=UTC)


def signed(body: str) -> bytes:
    """A line with a correct checksum, so the test reaches the check it means."""
    return f"{body} *{zlib.crc32(body.encode()):08X}\n".encode()


def rejected(raw: bytes) -> BadLine:
    with pytest.raises(BadLine) as caught:
        parse_line(raw, RECEIVED)
    return caught.value


# ---- every line form ------------------------------------------------------------------------


def test_start_line() -> None:
    parsed = parse_line(format_line("T07", 1, AT, Kind.START, "S0003", 8, "manual"), RECEIVED)
    assert (parsed.table_id, parsed.seq) == ("T07", 1)
    assert isinstance(parsed.event, m.ShoeStarted)
    assert parsed.event.data == m.ShoeStartedData(table_id="T07", shoe_id="S0003", decks=8, automatic=False)
    assert parsed.event.id == "T07:S0003:1"
    assert parsed.event.source == "shoe-reader/T07"
    assert parsed.event.subject == "T07"
    assert parsed.event.time == AT


def test_start_line_of_an_automatic_machine() -> None:
    event = parse_line(format_line("T07", 1, AT, Kind.START, "S1", 12, "automatic"), RECEIVED).event
    assert event.data == m.ShoeStartedData(table_id="T07", shoe_id="S1", decks=12, automatic=True)


@pytest.mark.parametrize(("face", "face_up"), [("down", False), ("up", True)])
def test_card_line(face: str, face_up: bool) -> None:
    event = parse_line(format_line("T07", 42, AT, Kind.CARD, "S0003", 17, "10H", face), RECEIVED).event
    assert isinstance(event, m.CardRead)
    assert event.data == m.CardReadData(table_id="T07", shoe_id="S0003", index=17, card="10H", face_up=face_up)
    assert event.id == "T07:S0003:42"


def test_cut_card_line() -> None:
    event = parse_line(format_line("T07", 300, AT, Kind.CUT, "S0003", 350), RECEIVED).event
    assert isinstance(event, m.CutCardReached)
    assert event.data == m.CutCardReachedData(table_id="T07", shoe_id="S0003", index=350)


def test_end_line() -> None:
    event = parse_line(format_line("T07", 420, AT, Kind.END, "S0003", 362), RECEIVED).event
    assert isinstance(event, m.ShoeEnded)
    assert event.data == m.ShoeEndedData(table_id="T07", shoe_id="S0003", cards_out=362)


def test_a_line_without_time_gets_the_time_it_was_received() -> None:
    line = format_line("T07", 3, None, Kind.CARD, "S1", 2, "KH", "down")
    assert b" - CARD " in line
    assert parse_line(line, RECEIVED).event.time == RECEIVED


@pytest.mark.parametrize(
    ("stamp", "expected"),
    [
        ("2026-11-29T11:00:05Z", datetime(2026, 11, 29, 11, 0, 5, tzinfo=UTC)),
        ("2026-11-29T11:00:05.1Z", datetime(2026, 11, 29, 11, 0, 5, 100000, tzinfo=UTC)),
        ("2026-11-29T11:00:05.123456Z", datetime(2026, 11, 29, 11, 0, 5, 123456, tzinfo=UTC)),
    ],
)
def test_times_with_0_to_6_decimals(stamp: str, expected: datetime) -> None:
    assert parse_line(signed(f"SHOE1 T07 1 {stamp} END S1 0"), RECEIVED).event.time == expected


def test_crlf_line_end_and_no_line_end_are_accepted() -> None:
    body = "SHOE1 T07 1 - END S1 0"
    crlf = f"{body} *{zlib.crc32(body.encode()):08X}\r\n".encode()
    assert parse_line(crlf, RECEIVED).seq == 1
    assert parse_line(crlf.rstrip(), RECEIVED).seq == 1


def test_ids_may_use_dots_dashes_and_underscores() -> None:
    parsed = parse_line(format_line("floor-2.T_07", 9, None, Kind.START, "2026-11-29.shoe_3", 6, "manual"), RECEIVED)
    assert parsed.event.id == "floor-2.T_07:2026-11-29.shoe_3:9"


def test_the_largest_values_in_range() -> None:
    parsed = parse_line(format_line("T" * 32, protocol.MAX_SEQ, None, Kind.CARD, "S" * 32, 999, "AS", "down"), RECEIVED)
    assert parsed.seq == 2**63 - 1
    assert parsed.event.data.index == 999  # type: ignore[attr-defined]


def test_format_line_writes_what_parse_line_reads_for_every_card() -> None:
    from surveil.core.cards import DECK

    for seq, card in enumerate(DECK, start=1):
        event = parse_line(format_line("T01", seq, AT, Kind.CARD, "S1", seq, card.code, "down"), RECEIVED).event
        assert event.data.card == card.code  # type: ignore[attr-defined]


def test_protocol_doctests() -> None:
    assert doctest.testmod(protocol).failed == 0


# ---- every garbled form, rejected with its reason -------------------------------------------

GOOD = format_line("T07", 42, AT, Kind.CARD, "S0003", 17, "10H", "down")
GARBLED_CARD = GOOD.replace(b"10H", b"10D")  # one bit flipped on the way: still a valid-looking card
GARBLED_INDEX = GOOD.replace(b" 17 ", b" 71 ")


def crc(line: bytes) -> str:
    return f"{zlib.crc32(line.rpartition(b' *')[0]):08X}"


@pytest.mark.parametrize(
    ("raw", "problem", "reason"),
    [
        (b"\n", Problem.LENGTH, "empty line"),
        (b"", Problem.LENGTH, "empty line"),
        (b"X" * 271 + b"\n", Problem.LENGTH, "line of 271 bytes; at most 270"),
        (GOOD.replace(b"T07", b"T\xc307"), Problem.ENCODING, "byte 0xC3 at position 7 is not ASCII"),
        (GOOD.replace(b" CARD", b"\tCARD"), Problem.ENCODING, "control character 0x09 at position 37"),
        (GOOD[:-11] + b"\n", Problem.CHECKSUM, "no checksum: a line must end with ' *' and 8 hex digits (CRC-32)"),
        (GOOD[:-3] + b"\n", Problem.CHECKSUM, "checksum '3A67BD' is not 8 uppercase hex digits"),
        (GOOD.replace(b"*3A67BD42", b"*3a67bd42"), Problem.CHECKSUM, "checksum '3a67bd42' is not 8 uppercase hex digits"),
        (GARBLED_CARD, Problem.CHECKSUM, f"checksum 3A67BD42 does not match the line (CRC-32 {crc(GARBLED_CARD)}): garbled"),
        (GARBLED_INDEX, Problem.CHECKSUM, f"checksum 3A67BD42 does not match the line (CRC-32 {crc(GARBLED_INDEX)}): garbled"),
    ],
)
def test_unusable_bytes_are_rejected_without_trusting_table_or_sequence(raw: bytes, problem: Problem, reason: str) -> None:
    error = rejected(raw)
    assert (error.problem, error.reason) == (problem, reason)
    assert (error.table_id, error.seq) == (None, None)


@pytest.mark.parametrize(
    ("body", "problem", "reason"),
    [
        ("SHOE2 T07 1 - END S1 0", Problem.FORMAT, "line starts with 'SHOE2', not 'SHOE1'"),
        ("shoe1 T07 1 - END S1 0", Problem.FORMAT, "line starts with 'shoe1', not 'SHOE1'"),
        ("SHOE1 T07 1 - END", Problem.FORMAT, "5 fields before the checksum; every line has at least 6"),
        ("SHOE1  T07 1 - END S1 0", Problem.FORMAT, "fields must be separated by exactly one space"),
        (" SHOE1 T07 1 - END S1 0", Problem.FORMAT, "fields must be separated by exactly one space"),
        ("SHOE1 T:07 1 - END S1 0", Problem.FIELD, "table id 'T:07': 1-32 of A-Z a-z 0-9 . _ - (starting with a letter or digit)"),
        ("SHOE1 -T07 1 - END S1 0", Problem.FIELD, "table id '-T07': 1-32 of A-Z a-z 0-9 . _ - (starting with a letter or digit)"),
        (
            "SHOE1 " + "T" * 33 + " 1 - END S1 0",
            Problem.FIELD,
            f"table id '{'T' * 33}': 1-32 of A-Z a-z 0-9 . _ - (starting with a letter or digit)",
        ),
        ("SHOE1 T07 0 - END S1 0", Problem.FIELD, "sequence number 0 is outside 1-9223372036854775807"),
        ("SHOE1 T07 007 - END S1 0", Problem.FIELD, "sequence number '007' is not a decimal number without sign or leading zeros"),
        ("SHOE1 T07 +7 - END S1 0", Problem.FIELD, "sequence number '+7' is not a decimal number without sign or leading zeros"),
        ("SHOE1 T07 9223372036854775808 - END S1 0", Problem.FIELD, "sequence number 9223372036854775808 is outside 1-9223372036854775807"),
    ],
)
def test_a_frame_without_trustworthy_table_and_sequence(body: str, problem: Problem, reason: str) -> None:
    error = rejected(signed(body))
    assert (error.problem, error.reason) == (problem, reason)
    assert error.seq is None


@pytest.mark.parametrize(
    ("body", "problem", "reason"),
    [
        ("SHOE1 T07 5 - DEAL S1 0", Problem.FORMAT, "unknown kind 'DEAL'; expected one of START, CARD, CUT, END"),
        ("SHOE1 T07 5 - card S1 3 AS down", Problem.FORMAT, "unknown kind 'card'; expected one of START, CARD, CUT, END"),
        ("SHOE1 T07 5 - START S1 8", Problem.FORMAT, "START takes 3 fields after the kind, got 2"),
        ("SHOE1 T07 5 - START S1 8 manual extra", Problem.FORMAT, "START takes 3 fields after the kind, got 4"),
        ("SHOE1 T07 5 - CARD S1 3 AS", Problem.FORMAT, "CARD takes 4 fields after the kind, got 3"),
        ("SHOE1 T07 5 - CUT S1", Problem.FORMAT, "CUT takes 2 fields after the kind, got 1"),
        ("SHOE1 T07 5 - END S1 3 4", Problem.FORMAT, "END takes 2 fields after the kind, got 3"),
        ("SHOE1 T07 5 - END S/1 3", Problem.FIELD, "shoe id 'S/1': 1-32 of A-Z a-z 0-9 . _ - (starting with a letter or digit)"),
        ("SHOE1 T07 5 11:00 END S1 3", Problem.FIELD, "time '11:00': expected '-' or RFC 3339 UTC like 2026-11-29T11:00:05.120Z"),
        (
            "SHOE1 T07 5 2026-11-29T11:00:05+08:00 END S1 3",
            Problem.FIELD,
            "time '2026-11-29T11:00:05+08:00': expected '-' or RFC 3339 UTC like 2026-11-29T11:00:05.120Z",
        ),
        (
            "SHOE1 T07 5 2026-11-29T11:00:05.1234567Z END S1 3",
            Problem.FIELD,
            "time '2026-11-29T11:00:05.1234567Z': expected '-' or RFC 3339 UTC like 2026-11-29T11:00:05.120Z",
        ),
        ("SHOE1 T07 5 2026-02-30T11:00:05Z END S1 3", Problem.FIELD, "time '2026-02-30T11:00:05Z': day is out of range for month"),
        ("SHOE1 T07 5 2026-11-29T25:00:05Z END S1 3", Problem.FIELD, "time '2026-11-29T25:00:05Z': hour must be in 0..23"),
        ("SHOE1 T07 5 - START S1 5 manual", Problem.FIELD, "decks 5 is outside 6-12"),
        ("SHOE1 T07 5 - START S1 13 manual", Problem.FIELD, "decks 13 is outside 6-12"),
        ("SHOE1 T07 5 - START S1 eight manual", Problem.FIELD, "decks 'eight' is not a decimal number without sign or leading zeros"),
        ("SHOE1 T07 5 - START S1 8 hand", Problem.FIELD, "dealing 'hand': expected manual or automatic"),
        ("SHOE1 T07 5 - CARD S1 0 AS down", Problem.FIELD, "shoe index 0 is outside 1-999"),
        ("SHOE1 T07 5 - CARD S1 1000 AS down", Problem.FIELD, "shoe index 1000 is outside 1-999"),
        ("SHOE1 T07 5 - CARD S1 -3 AS down", Problem.FIELD, "shoe index '-3' is not a decimal number without sign or leading zeros"),
        ("SHOE1 T07 5 - CARD S1 3 1H down", Problem.FIELD, "'1H' is not a card: expected rank (A 2-10 J Q K) + suit (S H D C)"),
        ("SHOE1 T07 5 - CARD S1 3 as down", Problem.FIELD, "'as' is not a card: expected rank (A 2-10 J Q K) + suit (S H D C)"),
        ("SHOE1 T07 5 - CARD S1 3 TH down", Problem.FIELD, "'TH' is not a card: expected rank (A 2-10 J Q K) + suit (S H D C)"),
        ("SHOE1 T07 5 - CARD S1 3 AS sideways", Problem.FIELD, "face 'sideways': expected down or up"),
        ("SHOE1 T07 5 - CUT S1 1000", Problem.FIELD, "cards before the cut card 1000 is outside 0-999"),
        ("SHOE1 T07 5 - END S1 x", Problem.FIELD, "cards out 'x' is not a decimal number without sign or leading zeros"),
    ],
)
def test_a_checksummed_frame_with_a_bad_field_names_it_and_keeps_table_and_sequence(body: str, problem: Problem, reason: str) -> None:
    error = rejected(signed(body))
    assert (error.problem, error.reason) == (problem, reason)
    assert (error.table_id, error.seq) == ("T07", 5)  # trusted: the device's line can be acknowledged


def test_bad_line_is_a_value_error_whose_message_is_the_reason() -> None:
    error = rejected(b"\n")
    assert isinstance(error, ValueError)
    assert str(error) == "empty line"
