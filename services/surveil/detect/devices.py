"""A device message refused for its signature is an attack on the table: a spoofed card read
changes what the shoe says came out, a spoofed bet what the table owes. The services that check
signatures dead-letter such messages, each on its own dead-letter topic, which only it may write;
this turns each into an alert for the table it names. Who refused the message is the topic's
service, never what the letter says: any service may write a letter that claims anything."""

from __future__ import annotations

from ..core.findings import AlertCode, Finding
from ..events.deadletter import SIGNATURE, DeadLetter
from .alerts import Context
from .watch import Raised

# The services that check device signatures, and what a spoofed message of their devices undermines.
ARTICLES = {"shoe-reader": "Art. 7", "table-controller": "Art. 13"}


def signature_finding(letter: DeadLetter, service: str) -> Raised | None:
    """The alert for ``letter``, read from ``service``'s own dead-letter topic; None when it is
    not a device message refused for its signature, or ``service`` checks no signatures."""
    if letter.kind != SIGNATURE or not letter.key or service not in ARTICLES:
        return None
    device = "card-reading shoe" if service == "shoe-reader" else "console or bet sensors"
    payload = letter.payload[:160].decode("ascii", "replace")
    finding = Finding(
        AlertCode.DEVICE_SIGNATURE,
        ARTICLES[service],
        f"A message claiming to come from table {letter.key}'s {device} was refused: {letter.reason}.",
        {"service": service, "origin": letter.origin, "reason": letter.reason, "message": payload},
    )
    # Where the message was refused, which tells two refusals apart (their alerts' ids): its topic's
    # partition and offset, or, for a device's connection, the time.
    where = f"{letter.partition}:{letter.offset}" if letter.offset is not None else letter.time.isoformat()
    context = Context(letter.key, f"device:{service}:{letter.origin}:{where}")
    return Raised(finding, context, letter.time)
