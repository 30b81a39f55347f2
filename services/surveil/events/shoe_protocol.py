"""The shoe line protocol, version 1 (docs/shoe-protocol.md): one ASCII line per thing the
card-reading shoe saw, parsed strictly into a ``baccarat.shoe`` event, or rejected with the
precise reason. Nothing is ever guessed: a line is either exactly right or rejected.

A line (the trailing ``*XXXXXXXX`` is the CRC-32 of everything before the space in front of it;
on a floor with device keys, ``~`` and the shoe's HMAC-SHA256 of what precedes it come before)::

    SHOE1 T07 42 2026-11-29T11:00:05.120Z CARD S0003 17 10H down *3A67BD42

``format_line`` writes lines (the simulated shoe speaks through it); ``parse_line`` reads them.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from ..core.cards import CARDS
from ..core.shoe import MAX_DECKS, MIN_DECKS
from . import codec, models
from .signing import DeviceKeys, shoe_device

VERSION = "SHOE1"
MAX_LINE_BYTES = 270  # without the line end: 200 for the fields, 66 for a signature
MAX_SEQ = 2**63 - 1
MAX_COUNT = 999  # shoe indices and card counts: 12 decks are 624 cards
SOURCE_PREFIX = "shoe-reader/"

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,31}")
_NUMBER = re.compile(r"0|[1-9][0-9]*")
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z")
_CHECKSUM = re.compile(r"[0-9A-F]{8}")
_SIGNATURE = re.compile(r"[0-9a-f]{64}")


class Kind(StrEnum):
    """What the shoe reports; each kind has its fixed list of arguments after the shoe id."""

    START = "START"  # <decks> <manual|automatic>
    CARD = "CARD"  # <index> <card> <down|up>
    CUT = "CUT"  # <cards before the cut card>
    END = "END"  # <cards out>


_ARGUMENTS = {Kind.START: 2, Kind.CARD: 3, Kind.CUT: 1, Kind.END: 1}


class Problem(StrEnum):
    """Why a line was rejected, in a few classes (the metric label); the message has the detail."""

    ENCODING = "encoding"  # not ASCII, or a control character
    LENGTH = "length"  # empty or too long
    CHECKSUM = "checksum"  # missing or wrong: the line was garbled on the way
    FORMAT = "format"  # version, field count, kind
    FIELD = "field"  # a field's value
    SIGNATURE = "signature"  # missing or not the shoe's: a spoofed or altered line
    REPLAY = "replay"  # the shoe's, but acknowledged before: sent again by someone else (the reader judges)


class BadLine(ValueError):
    """A line that is not protocol v1. ``table_id`` and ``seq`` are set only when the checksum
    held and they parsed, i.e. when they can be trusted (to acknowledge the line). A line whose
    signature fails is not trusted: it only ``claims`` a table (where the alert goes), and it
    uses up no sequence number, or a spoofer could silence the real shoe's next line."""

    def __init__(
        self, problem: Problem, reason: str, table_id: str | None = None, seq: int | None = None, claims: str | None = None
    ) -> None:
        super().__init__(reason)
        self.problem = problem
        self.reason = reason
        self.table_id = table_id
        self.seq = seq
        self.claims = claims or table_id


@dataclass(frozen=True, slots=True)
class Parsed:
    table_id: str
    seq: int
    event: models.Event


def checksum(body: bytes) -> str:
    return f"{zlib.crc32(body):08X}"


def format_time(time: datetime) -> str:
    """RFC 3339 in UTC with milliseconds, as the protocol writes it."""
    return time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def format_line(table_id: str, seq: int, time: datetime | None, kind: Kind, shoe_id: str, *arguments: object) -> bytes:
    """One protocol line, with its checksum and line end (``signed_line`` signs it).

    >>> format_line("T07", 1, None, Kind.START, "T07-S1", 8, "manual")
    b'SHOE1 T07 1 - START T07-S1 8 manual *EC51C2EB\\n'
    """
    stamp = "-" if time is None else format_time(time)
    body = " ".join([VERSION, table_id, str(seq), stamp, kind.value, shoe_id, *map(str, arguments)]).encode("ascii")
    return body + b" *" + checksum(body).encode() + b"\n"


def signed_line(line: bytes, keys: DeviceKeys) -> bytes:
    """``line`` (from ``format_line``, unsigned) with its shoe's signature: what a shoe
    provisioned with its key sends."""
    body = line.rstrip(b"\n").rpartition(b" *")[0]
    table_id = body.split(b" ", 2)[1].decode("ascii")
    body += b" ~" + keys.sign(shoe_device(table_id), body).encode()
    return body + b" *" + checksum(body).encode() + b"\n"


def parse_line(raw: bytes, received: datetime, keys: DeviceKeys | None = None) -> Parsed:
    """The event a line reports. ``received`` is the event's time when the line has none. With
    ``keys``, the line must carry its shoe's signature.

    Raises ``BadLine`` with the reason for anything that is not exactly protocol v1.
    """
    line = raw[:-1] if raw.endswith(b"\n") else raw
    line = line[:-1] if line.endswith(b"\r") else line
    if not line:
        raise BadLine(Problem.LENGTH, "empty line")
    if len(line) > MAX_LINE_BYTES:
        raise BadLine(Problem.LENGTH, f"line of {len(line)} bytes; at most {MAX_LINE_BYTES}")
    try:
        text = line.decode("ascii")
    except UnicodeDecodeError as error:
        raise BadLine(Problem.ENCODING, f"byte 0x{line[error.start]:02X} at position {error.start} is not ASCII") from None
    control = next((i for i, char in enumerate(text) if not " " <= char <= "~"), None)
    if control is not None:
        raise BadLine(Problem.ENCODING, f"control character 0x{ord(text[control]):02X} at position {control}")
    body, star, claimed = text.rpartition(" *")
    if not star:
        raise BadLine(Problem.CHECKSUM, "no checksum: a line must end with ' *' and 8 hex digits (CRC-32)")
    if not _CHECKSUM.fullmatch(claimed):
        raise BadLine(Problem.CHECKSUM, f"checksum {claimed!r} is not 8 uppercase hex digits")
    computed = checksum(body.encode("ascii"))
    if claimed != computed:
        raise BadLine(Problem.CHECKSUM, f"checksum {claimed} does not match the line (CRC-32 {computed}): garbled")
    body, signature = _signature(body)
    fields = body.split(" ")
    if "" in fields:
        raise BadLine(Problem.FORMAT, "fields must be separated by exactly one space")
    if fields[0] != VERSION:
        raise BadLine(Problem.FORMAT, f"line starts with {fields[0]!r}, not {VERSION!r}")
    if len(fields) < 6:
        raise BadLine(Problem.FORMAT, f"{len(fields)} fields before the checksum; every line has at least 6")
    _, table_id, seq_text, stamp, kind_text, shoe_id, *arguments = fields
    _check_id("table id", table_id)
    seq = _number("sequence number", seq_text, 1, MAX_SEQ)
    if keys is not None:
        problem = keys.problem(shoe_device(table_id), body.encode("ascii"), signature)
        if problem:
            raise BadLine(Problem.SIGNATURE, problem, claims=table_id)
    try:
        kind = Kind(kind_text)
    except ValueError:
        raise BadLine(Problem.FORMAT, f"unknown kind {kind_text!r}; expected one of {', '.join(Kind)}", table_id, seq) from None
    try:
        if len(arguments) != _ARGUMENTS[kind]:
            raise BadLine(Problem.FORMAT, f"{kind} takes {_ARGUMENTS[kind] + 1} fields after the kind, got {len(arguments) + 1}")
        _check_id("shoe id", shoe_id)
        time = received if stamp == "-" else _time(stamp)
        data = _data(kind, table_id, shoe_id, arguments)
    except BadLine as error:
        raise BadLine(error.problem, error.reason, table_id, seq) from None
    event = codec.make(_EVENT_TYPES[kind], data, id=f"{table_id}:{shoe_id}:{seq}", source=SOURCE_PREFIX + table_id, time=time)
    return Parsed(table_id, seq, event)


def _signature(body: str) -> tuple[str, str | None]:
    """The body without its signature field, and the signature (None when there is none)."""
    signed, tilde, signature = body.rpartition(" ~")
    if not tilde:
        return body, None
    if not _SIGNATURE.fullmatch(signature):
        raise BadLine(Problem.SIGNATURE, f"signature {signature[:16]!r}... is not 64 lowercase hex digits")
    return signed, signature


_EVENT_TYPES: dict[Kind, type[models.Event]] = {
    Kind.START: models.ShoeStarted,
    Kind.CARD: models.CardRead,
    Kind.CUT: models.CutCardReached,
    Kind.END: models.ShoeEnded,
}


def _data(kind: Kind, table_id: str, shoe_id: str, arguments: list[str]) -> models.Data:
    if kind is Kind.START:
        decks = _number("decks", arguments[0], MIN_DECKS, MAX_DECKS)
        automatic = _choice("dealing", arguments[1], {"manual": False, "automatic": True})
        return models.ShoeStartedData(table_id=table_id, shoe_id=shoe_id, decks=decks, automatic=automatic)
    if kind is Kind.CARD:
        index = _number("shoe index", arguments[0], 1, MAX_COUNT)
        if arguments[1] not in CARDS:
            raise BadLine(Problem.FIELD, f"{arguments[1]!r} is not a card: expected rank (A 2-10 J Q K) + suit (S H D C)")
        face_up = _choice("face", arguments[2], {"down": False, "up": True})
        return models.CardReadData(table_id=table_id, shoe_id=shoe_id, index=index, card=arguments[1], face_up=face_up)
    if kind is Kind.CUT:
        before = _number("cards before the cut card", arguments[0], 0, MAX_COUNT)
        return models.CutCardReachedData(table_id=table_id, shoe_id=shoe_id, index=before)
    cards_out = _number("cards out", arguments[0], 0, MAX_COUNT)
    return models.ShoeEndedData(table_id=table_id, shoe_id=shoe_id, cards_out=cards_out)


def _check_id(what: str, text: str) -> None:
    if not _ID.fullmatch(text):
        raise BadLine(Problem.FIELD, f"{what} {text!r}: 1-32 of A-Z a-z 0-9 . _ - (starting with a letter or digit)")


def _number(what: str, text: str, low: int, high: int) -> int:
    if not _NUMBER.fullmatch(text):
        raise BadLine(Problem.FIELD, f"{what} {text!r} is not a decimal number without sign or leading zeros")
    value = int(text)
    if not low <= value <= high:
        raise BadLine(Problem.FIELD, f"{what} {value} is outside {low}-{high}")
    return value


def _choice(what: str, text: str, choices: dict[str, bool]) -> bool:
    if text not in choices:
        raise BadLine(Problem.FIELD, f"{what} {text!r}: expected {' or '.join(choices)}")
    return choices[text]


def _time(text: str) -> datetime:
    if not _TIME.fullmatch(text):
        raise BadLine(Problem.FIELD, f"time {text!r}: expected '-' or RFC 3339 UTC like 2026-11-29T11:00:05.120Z")
    try:
        return datetime.fromisoformat(text)
    except ValueError as error:
        raise BadLine(Problem.FIELD, f"time {text!r}: {error}") from None
