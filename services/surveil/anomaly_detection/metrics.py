"""What the anomaly-detection service exports to Prometheus."""

from __future__ import annotations

import time

from prometheus_client import Counter, Histogram

from ..core.findings import SEVERITY, severities
from ..core.play import Outcome
from ..detect.watch import TableState
from ..events import models, topics
from ..runtime.metrics import DEAD_LETTERS, TableFamily

__all__ = [
    "ALERTS",
    "ALERT_LATENCY",
    "COMMIT_SECONDS",
    "DEAD_LETTERS",
    "EVENT_LATENCY",
    "OUTPUTS_DROPPED",
    "QUEUE_LATENCY",
    "ROUNDS_CHECKED",
    "ROUND_OUTCOMES",
    "TABLES_DECODED",
    "TABLE_ALERTS",
    "TABLE_LAST_EVENT",
    "TABLE_SHOE_IN_PLAY",
    "alert_raised",
    "table_event",
]

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

ROUNDS_CHECKED = Counter("surveil_rounds_checked_total", "Rounds replayed against the rules.")
ALERTS = Counter("surveil_alerts_total", "Alerts raised, by rule and severity.", ["rule", "severity"])
# Every rule's series exists from the start at 0: a series that first appears at 1 is an increase
# that Prometheus' increase() and rate() cannot see, and a rule's first alert is the one that counts.
for _code in SEVERITY:
    for _severity in severities(_code):
        ALERTS.labels(_code.value, _severity.value)
# The same alerts by table, for the drill-down dashboard and the page that names the table
# (SurveilCriticalAlert: a rule's severity is its own, or one of two for a graded rule, so it adds
# at most a series). Its series start with a table's first alert: labels that many are not made up
# front. Not by patron: /metrics is unauthenticated, and which patron an alert names is for the
# room's alert feed and the incident report, not for it.
TABLE_ALERTS = TableFamily(
    "surveil_table_alerts_total", "Alerts raised at a table, by rule and severity.", "counter", ("table", "rule", "severity")
)


def alert_raised(alert: models.AlertRaised) -> None:
    d = alert.data
    ALERTS.labels(d.rule, d.severity).inc()
    TABLE_ALERTS.inc(alert.subject, d.rule, d.severity)


# By the topic the detectors read the event from: a card read (baccarat.shoe) comes one hop from
# its shoe, a settlement (baccarat.settlement) two, with a round's time; one figure would mix them.
ALERT_LATENCY = Histogram(
    "surveil_alert_latency_seconds",
    "From the event that revealed a finding (a card read, a round's end) to its alert being published, by the topic that event came from.",
    ["topic"],
    buckets=LATENCY_BUCKETS,
)
EVENT_LATENCY = Histogram(
    "surveil_detection_latency_seconds",
    "From an event's time at the table to the detectors having processed it, by topic.",
    ["topic"],
    buckets=LATENCY_BUCKETS,
)
QUEUE_LATENCY = Histogram(
    "surveil_detection_queue_latency_seconds",
    "From an event's Kafka record timestamp (its publisher's send) to the detectors having processed it, by topic: "
    "the broker's and the detectors' share of surveil_detection_latency_seconds.",
    ["topic"],
    buckets=LATENCY_BUCKETS,
)

OUTPUTS_DROPPED = Counter(
    "surveil_detection_outputs_dropped_total",
    "Outputs (alerts, facts, dead letters) dropped from a table's or chart's outbox, at its bound of 256, before their events "
    "were known committed: were the worker to crash now, a redelivered event would not publish them again. Commits are stalled, "
    "or a table's events come faster than 256 outputs a commit interval.",
)
TABLES_DECODED = Counter(
    "surveil_detection_tables_decoded_total",
    "Tables' values decoded from the worker's store for an event, not found among the WATCH_CACHE_TABLES it last wrote: "
    "each table once after a start or a rebalance, and steadily if the worker holds more tables than that.",
)
COMMIT_SECONDS = Histogram(
    "surveil_detection_commit_seconds",
    "Time an offset commit of the detectors took: the changed tables written to their changelog and "
    "acknowledged, then the offsets committed. A commit past COMMIT_TIMEOUT_S stops the worker.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
)

# Per table, for the surveillance room's dashboards and the "table silent" alert (ops/prometheus).
ROUND_OUTCOMES = TableFamily(
    "surveil_round_outcomes_total",
    "Rounds completed at a table, by outcome (player, banker, tie) and the dealer who ran them; demonstration rounds are left out.",
    "counter",
    ("table", "dealer", "outcome"),
)
TABLE_LAST_EVENT = TableFamily(
    "surveil_table_last_event_timestamp_seconds",
    "When (Unix time, this worker's clock) this worker last processed an event of the table's shoe or table stream.",
    "gauge",
    ("table",),
)
TABLE_SHOE_IN_PLAY = TableFamily(
    "surveil_table_shoe_in_play",
    "1 while the table's shoe is in play (started and not ended, by the shoe stream), 0 once it ended.",
    "gauge",
    ("table",),
)

_SHOE_EVENTS = (models.ShoeStarted, models.CardRead, models.CutCardReached, models.ShoeEnded)


def table_event(event: models.Event, state: TableState) -> None:
    """The per-table metrics, once ``event`` was applied to its table's ``state`` (each event once:
    a redelivered event does not come here)."""
    table = state.table_id
    if event.topic == topics.SETTLEMENT:  # the settlement's events are not the table's activity
        return
    # The worker's clock, not the event's time: a recorded or simulated floor replayed through
    # the broker has event times of its own, and what the room asks is "when did we last hear".
    TABLE_LAST_EVENT.set(table, value=time.time())
    if isinstance(event, _SHOE_EVENTS):
        shoe_id = event.data.shoe_id
        shoe = state.shoes.get(shoe_id)
        ended = isinstance(event, models.ShoeEnded) or shoe_id in state.finished_shoes or (shoe is not None and shoe.shoe.ended)
        TABLE_SHOE_IN_PLAY.set(table, value=0 if ended else 1)
    elif isinstance(event, models.RoundOpened):  # the round's series from 0, before its first outcome
        for outcome in Outcome:
            ROUND_OUTCOMES.touch(table, event.data.dealer_id, outcome.value)
    elif isinstance(event, models.RoundCompleted):
        watched = state.rounds.get(event.data.round_id)
        played = watched.round if watched is not None else None
        if played is None or not played.demo:
            dealer = played.dealer_id if played is not None else "unknown"
            ROUND_OUTCOMES.inc(table, dealer, event.data.outcome.value)
