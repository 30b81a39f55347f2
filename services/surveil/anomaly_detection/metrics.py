"""What the anomaly-detection service exports to Prometheus."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from ..runtime.metrics import DEAD_LETTERS

__all__ = ["ALERTS", "ALERT_LATENCY", "DEAD_LETTERS", "EVENT_LATENCY", "ROUNDS_CHECKED"]

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

ROUNDS_CHECKED = Counter("surveil_rounds_checked_total", "Rounds replayed against the rules.")
ALERTS = Counter("surveil_alerts_total", "Alerts raised, by rule and severity.", ["rule", "severity"])
ALERT_LATENCY = Histogram(
    "surveil_alert_latency_seconds",
    "From the table event that revealed a finding (a card read, a round's end) to its alert being published.",
    buckets=LATENCY_BUCKETS,
)
EVENT_LATENCY = Histogram(
    "surveil_detection_latency_seconds",
    "From an event's time at the table to the detectors having processed it.",
    buckets=LATENCY_BUCKETS,
)
