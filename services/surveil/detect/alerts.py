"""From a finding to the ``baccarat.alert.raised`` event a surveillance officer sees.

Alert ids are a hash of the rule, the table and what the finding is about (a round, a bet, a
shoe index), so the same finding always gets the same id and redelivery never shows an officer
the same alert twice. The alert's time is the time of the event that revealed it.

Alerts are a proof of what the detectors raised. Each table's alerts form a hash chain: an
alert's ``chain`` is ``sha256(previous chain + "\n" + the alert as JSON with sorted keys, its
envelope (id, time, source, subject, type) and data, without chain and signature)``; the first
alert of a table chains from the empty string. Its ``signature`` is the detectors' Ed25519
signature of the chain value (``runtime.alert_keys``): no one without their private key can
make a link, so an alert changed, inserted or moved shows, and so does a chain recomputed over
a changed log. Checkpoints (``checkpoints``, published per partition of the alerts topic every
minute) state, signed, how many alerts each table has and the chain of its last: a log cut short,
or with a table taken out, shows against them. Whoever publishes a table's alerts, in order,
links them (``Chains``); ``surveil verify`` checks a recorded alert log.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import msgspec

from ..core.findings import Finding
from ..events import codec
from ..events.models import AlertCheckpoint, AlertCheckpointData, AlertRaised, AlertRaisedData, ChainHead

SOURCE = "anomaly-detection"


@dataclass(frozen=True, slots=True)
class Context:
    """Where a finding belongs: the table, and what of shoe, round, bet, patron and dealer applies."""

    table_id: str
    scope: str  # what makes the finding unique at this table, e.g. "round:T07-S3-12"
    shoe_id: str | None = None
    round_id: str | None = None
    bet_id: str | None = None
    patron_id: str | None = None
    dealer_id: str | None = None
    floor_wide: bool = False  # about a patron or dealer, wherever seen: the table is not in the id


def alert_id(rule: str, table_id: str, scope: str) -> str:
    return hashlib.sha256(f"{rule}|{table_id}|{scope}".encode()).hexdigest()[:32]


def raise_alert(finding: Finding, context: Context, time: datetime, ordinal: int = 0) -> Any:
    """The alert event for ``finding``; ``ordinal`` tells apart findings of one rule in one scope."""
    scope = context.scope if ordinal == 0 else f"{context.scope}#{ordinal}"
    identifier = alert_id(finding.code, "" if context.floor_wide else context.table_id, scope)
    data = AlertRaisedData(
        table_id=context.table_id,
        alert_id=identifier,
        rule=str(finding.code),
        article=finding.article,
        severity=finding.severity.value,
        summary=finding.summary,
        shoe_id=context.shoe_id,
        round_id=context.round_id,
        bet_id=context.bet_id,
        patron_id=context.patron_id,
        dealer_id=context.dealer_id,
        evidence=finding.evidence,
    )
    return codec.make(AlertRaised, data, id=identifier, source=SOURCE, time=time)


_canonical = msgspec.json.Encoder(order="sorted").encode


class Signer(Protocol):
    """The detectors' key (``runtime.alert_keys.AlertSigner``)."""

    def sign(self, data: bytes) -> str: ...


def chain_link(previous: str, alert: AlertRaised) -> str:
    """The chain value of ``alert`` following one whose chain is ``previous``."""
    unsealed = msgspec.structs.replace(alert, data=msgspec.structs.replace(alert.data, chain=None, signature=None))
    return hashlib.sha256(previous.encode() + b"\n" + _canonical(unsealed)).hexdigest()


def chained(alert: AlertRaised, previous: str, signer: Signer | None = None) -> AlertRaised:
    """``alert`` linked to its table's previous alert, and signed with ``signer``."""
    chain = chain_link(previous, alert)
    signature = None if signer is None else signer.sign(chain.encode())
    return msgspec.structs.replace(alert, data=msgspec.structs.replace(alert.data, chain=chain, signature=signature))


def checkpoint_bytes(checkpoint: AlertCheckpoint) -> bytes:
    """What a checkpoint's signature signs: the checkpoint, envelope and data, without it."""
    return _canonical(msgspec.structs.replace(checkpoint, data=msgspec.structs.replace(checkpoint.data, signature=None)))


# What a checkpoint's tables may take in JSON, at most: half the broker's largest record, the rest
# ample for the envelope and the signature. More (a flood of spoofed device messages, each claiming
# a table of its own, makes a table of each) go in more checkpoints of the same time, each naming
# its part and how many there are (``checkpoints``).
CHECKPOINT_TABLE_BYTES = 512 * 1024
_json = msgspec.json.Encoder().encode


def checkpoints(
    heads: dict[str, ChainHead], time: datetime, signer: Signer, partition: int = 0, partitions: int = 1, every: int = 0
) -> list[AlertCheckpoint]:
    """The signed checkpoints of the tables ``heads`` of one partition (of ``partitions``): one,
    unless their JSON is over CHECKPOINT_TABLE_BYTES; then parts of it, whose ids say which part
    of how many (``checkpoint/<p>/<time>/<n>of<N>``), so that a part taken out of a log shows."""
    parts: list[dict[str, ChainHead]] = [{}]
    size = 0
    for table, head in sorted(heads.items()):
        entry = len(_json(table)) + len(_json(head)) + 2
        if size + entry > CHECKPOINT_TABLE_BYTES and parts[-1]:
            parts.append({})
            size = 0
        parts[-1][table] = head
        size += entry
    return [checkpoint(part, time, signer, partition, partitions, every, (n, len(parts))) for n, part in enumerate(parts, start=1)]


def checkpoint(
    heads: dict[str, ChainHead],
    time: datetime,
    signer: Signer,
    partition: int = 0,
    partitions: int = 1,
    every: int = 0,
    part: tuple[int, int] = (1, 1),
) -> AlertCheckpoint:
    """The signed checkpoint of the tables ``heads`` of one partition (of ``partitions``); ``part``
    is which of how many checkpoints of the partition and time it is (``checkpoints``)."""
    data = AlertCheckpointData(partition=partition, partitions=partitions, every=every, tables=dict(sorted(heads.items())))
    unsigned = codec.make(
        AlertCheckpoint,
        data,
        id=f"checkpoint/{partition}/{time.timestamp():.3f}{f'/{part[0]}of{part[1]}' if part[1] > 1 else ''}",
        source=SOURCE,
        time=time,
        subject=f"partition/{partition}",
    )
    data = msgspec.structs.replace(unsigned.data, signature=signer.sign(checkpoint_bytes(unsigned)))
    return msgspec.structs.replace(unsigned, data=data)


@dataclass
class Chains:
    """Each table's chain so far (how many alerts, the chain of the last), to link the next one."""

    signer: Signer | None = None
    heads: dict[str, ChainHead] = field(default_factory=dict)

    def link(self, alert: AlertRaised) -> AlertRaised:
        head = self.heads.get(alert.subject)
        linked = chained(alert, head.head if head else "", self.signer)
        assert linked.data.chain is not None
        self.heads[alert.subject] = ChainHead(head.count + 1 if head else 1, linked.data.chain)
        return linked
