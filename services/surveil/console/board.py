"""What the console shows, rebuilt from the topics: the alerts with their handling, and the floor.

Pure (no I/O, no clock of its own: ``now`` is passed in). The console's Kafka thread hands it
every event read (``ingest``), in topic order per table; the web side reads it. Both run on the
event loop's thread, so nothing here is locked.

An alert's state is the fold of its actions on ``baccarat.alert-actions``, in the order the topic
holds them: open -> acknowledged -> closed; ``assign`` sets who has it, ``note`` adds a note. An
action that does not fit the state it finds (a second close, two supervisors at once) stays in
the audit trail, marked as not applied.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta, timezone

from ..events import models

MACAU = timezone(timedelta(hours=8), "Macau")
SEVERITIES = ("critical", "warning", "info")
STATUSES = ("open", "acknowledged", "closed")
REASONS = {"confirmed": "confirmed", "false_alarm": "false alarm", "dealer_corrected": "dealer corrected at the table"}
OUTCOME_LETTER = {"banker": "B", "player": "P", "tie": "T"}


@dataclass(slots=True)
class ActionRecord:
    event: models.AlertAction
    applied: bool
    why_not: str = ""

    @property
    def data(self) -> models.AlertActionData:
        return self.event.data


@dataclass(slots=True)
class AlertEntry:
    alert: models.AlertRaised
    seq: int  # in the order the console read them
    status: str = "open"
    assignee: str | None = None
    acknowledged_by: str | None = None
    closed_by: str | None = None
    reason: str | None = None
    actions: list[ActionRecord] = field(default_factory=list)

    @property
    def data(self) -> models.AlertRaisedData:
        return self.alert.data

    @property
    def id(self) -> str:
        return self.alert.data.alert_id

    @property
    def is_open(self) -> bool:
        return self.status != "closed"


@dataclass(slots=True)
class Tile:
    """A table on the floor view."""

    table_id: str
    shoe_id: str | None = None
    dealer_id: str | None = None
    round_id: str | None = None
    round_no: int | None = None
    round_open: bool = False
    last_result: str | None = None  # "B 7-4", "T 6-6"
    last_time: datetime | None = None


def refusal(entry: AlertEntry, action: models.AlertActionData) -> str:
    """Why ``action`` does not apply to the alert as it stands ('' when it does)."""
    if action.action == "note":
        return ""
    if entry.status == "closed":
        return "the alert is closed"
    if action.action == "acknowledge" and entry.status != "open":
        return "already acknowledged"
    return ""


def shift_start(now: datetime, starts: tuple[time, ...]) -> datetime:
    """The start of the shift ``now`` falls in, shifts starting at ``starts`` (Macau time)."""
    local = now.astimezone(MACAU)
    candidates = [datetime.combine(local.date() - timedelta(days=d), t, MACAU) for d in (0, 1) for t in starts]
    return max(c for c in candidates if c <= local).astimezone(UTC)


class Board:
    def __init__(self) -> None:
        self.alerts: dict[str, AlertEntry] = {}
        self.tiles: dict[str, Tile] = {}
        self.by_table: dict[str, list[str]] = {}
        self.pending_actions: dict[str, list[models.AlertAction]] = {}  # read before their alert
        self.action_ids: set[str] = set()
        self.latest: datetime | None = None  # the floor's clock: the latest time an event carried
        self._seq = 0

    # ---- the events ----------------------------------------------------------------------

    def ingest(self, event: models.Event) -> AlertEntry | Tile | None:
        """Take one event; what it changed (an alert or a table), or None."""
        if not isinstance(event, models.AlertAction) and (self.latest is None or event.time > self.latest):
            self.latest = event.time
        if isinstance(event, models.AlertRaised):
            return self._alert(event)
        if isinstance(event, models.AlertAction):
            return self._action(event)
        if isinstance(event, models.RoundOpened | models.RoundCompleted | models.RoundVoided | models.ShoeStarted):
            return self._table(event)
        return None

    def _alert(self, event: models.AlertRaised) -> AlertEntry | None:
        d = event.data
        if d.alert_id in self.alerts:
            return None  # redelivered
        self._seq += 1
        entry = self.alerts[d.alert_id] = AlertEntry(event, self._seq)
        self.by_table.setdefault(d.table_id, []).append(d.alert_id)
        self.tile(d.table_id)
        for action in self.pending_actions.pop(d.alert_id, []):
            self._apply(entry, action)
        return entry

    def _action(self, event: models.AlertAction) -> AlertEntry | None:
        if event.id in self.action_ids:
            return None
        self.action_ids.add(event.id)
        entry = self.alerts.get(event.data.alert_id)
        if entry is None:
            self.pending_actions.setdefault(event.data.alert_id, []).append(event)
            return None
        self._apply(entry, event)
        return entry

    @staticmethod
    def _apply(entry: AlertEntry, event: models.AlertAction) -> None:
        d = event.data
        why_not = refusal(entry, d)
        entry.actions.append(ActionRecord(event, not why_not, why_not))
        if why_not:
            return
        if d.action == "acknowledge":
            entry.status, entry.acknowledged_by = "acknowledged", d.user
        elif d.action == "assign":
            entry.assignee = d.assignee
            if entry.status == "open":
                entry.status, entry.acknowledged_by = "acknowledged", d.user
        elif d.action == "close":
            entry.status, entry.closed_by, entry.reason = "closed", d.user, d.reason

    def tile(self, table_id: str) -> Tile:
        tile = self.tiles.get(table_id)
        if tile is None:
            tile = self.tiles[table_id] = Tile(table_id)
        return tile

    def _table(self, event: models.RoundOpened | models.RoundCompleted | models.RoundVoided | models.ShoeStarted) -> Tile:
        d = event.data
        tile = self.tile(d.table_id)
        if tile.last_time is not None and event.time < tile.last_time:
            return tile  # an older event (a redelivery) does not turn the table back
        tile.last_time = event.time
        if isinstance(d, models.ShoeStartedData):
            tile.shoe_id, tile.round_open, tile.round_no = d.shoe_id, False, None
        elif isinstance(d, models.RoundOpenedData):
            tile.shoe_id, tile.dealer_id, tile.round_id = d.shoe_id, d.dealer_id, d.round_id
            tile.round_no, tile.round_open = d.round_no, True
        elif isinstance(d, models.RoundCompletedData):
            if d.round_id == tile.round_id:
                tile.round_open = False
            high, low = max(d.player_total, d.banker_total), min(d.player_total, d.banker_total)
            tile.last_result = f"{OUTCOME_LETTER[str(d.outcome)]} {high}-{low}"
        elif d.round_id == tile.round_id:
            tile.round_open, tile.last_result = False, "void"
        return tile

    # ---- what the pages read ---------------------------------------------------------------

    def counts(self) -> Counter[str]:
        """Open alerts by severity."""
        return Counter(e.data.severity for e in self.alerts.values() if e.is_open)

    def listing(
        self,
        *,
        table: str = "",
        rule: str = "",
        severity: str = "",
        status: str = "",
        limit: int = 500,
    ) -> list[AlertEntry]:
        """Alerts matching the filters, newest first (empty filter: any)."""
        if table:
            ids = self.by_table.get(table, [])
            entries = [self.alerts[i] for i in ids]
        else:
            entries = list(self.alerts.values())
        found = [
            e
            for e in entries
            if (not rule or e.data.rule == rule) and (not severity or e.data.severity == severity) and (not status or e.status == status)
        ]
        found.sort(key=lambda e: (e.alert.time, e.seq), reverse=True)
        return found[:limit]

    def rules(self) -> list[str]:
        return sorted({e.data.rule for e in self.alerts.values()})

    def worst_open(self, table_id: str) -> str | None:
        severities = {self.alerts[i].data.severity for i in self.by_table.get(table_id, []) if self.alerts[i].is_open}
        return next((s for s in SEVERITIES if s in severities), None)

    def alerts_since(self, table_id: str, since: datetime) -> int:
        return sum(1 for i in self.by_table.get(table_id, []) if self.alerts[i].alert.time >= since)

    def chain_heads(self) -> dict[str, str]:
        """Each table's alert-chain head: the ``chain`` of its last alert."""
        heads: dict[str, str] = {}
        for table_id, ids in self.by_table.items():
            chained = [self.alerts[i] for i in ids if self.alerts[i].data.chain]
            if chained:
                last = max(chained, key=lambda e: (e.alert.time, e.seq))
                heads[table_id] = last.data.chain or ""
        return heads
