"""From a finding to the ``baccarat.alert.raised`` event a surveillance officer sees.

Alert ids are a hash of the rule, the table and what the finding is about (a round, a bet, a
shoe index), so the same finding always gets the same id and redelivery never shows an officer
the same alert twice. The alert's time is the time of the event that revealed it.

Alerts are tamper-evident: each table's alerts form a hash chain. An alert's ``chain`` is
``sha256(previous chain + "\n" + its data as JSON with sorted keys, without chain)``; the first
alert of a table chains from the empty string. Whoever publishes a table's alerts, in order,
links them (``Chains``); ``surveil verify`` checks a recorded alert log.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec

from ..core.findings import Finding
from ..events import codec
from ..events.models import AlertRaised, AlertRaisedData

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


def chain_link(previous: str, data: AlertRaisedData) -> str:
    """The chain value of an alert with ``data`` following one whose chain is ``previous``."""
    unchained = msgspec.structs.replace(data, chain=None)
    return hashlib.sha256(previous.encode() + b"\n" + _canonical(unchained)).hexdigest()


def chained(alert: AlertRaised, previous: str) -> AlertRaised:
    """``alert`` linked to its table's previous alert."""
    data = msgspec.structs.replace(alert.data, chain=chain_link(previous, alert.data))
    return msgspec.structs.replace(alert, data=data)


class Chains(msgspec.Struct):
    """The last chain value of each table's alerts, to link the next one."""

    last: dict[str, str] = {}

    def link(self, alert: AlertRaised) -> AlertRaised:
        linked = chained(alert, self.last.get(alert.subject, ""))
        assert linked.data.chain is not None
        self.last[alert.subject] = linked.data.chain
        return linked
