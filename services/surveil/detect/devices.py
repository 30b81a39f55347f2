"""A device message refused for its signature is an attack on the table: a spoofed card read
changes what the shoe says came out, a spoofed bet what the table owes. The services that check
signatures dead-letter such messages; this turns each into an alert for the table it names."""

from __future__ import annotations

from ..core.findings import AlertCode, Finding
from ..events.deadletter import SIGNATURE, DeadLetter
from .alerts import Context
from .watch import Raised

# What a spoofed message of each service's devices undermines.
ARTICLES = {"shoe-reader": "Art. 7", "table-controller": "Art. 13"}


def signature_finding(letter: DeadLetter) -> Raised | None:
    if letter.kind != SIGNATURE or not letter.key:
        return None
    device = "card-reading shoe" if letter.service == "shoe-reader" else "console or bet sensors"
    payload = letter.payload[:160].decode("ascii", "replace")
    finding = Finding(
        AlertCode.DEVICE_SIGNATURE,
        ARTICLES.get(letter.service, "Art. 7"),
        f"A message claiming to come from table {letter.key}'s {device} was refused: {letter.reason}.",
        {"service": letter.service, "origin": letter.origin, "reason": letter.reason, "message": payload},
    )
    where = letter.offset if letter.offset is not None else letter.time.isoformat()
    context = Context(letter.key, f"device:{letter.service}:{letter.origin}:{where}")
    return Raised(finding, context, letter.time)
