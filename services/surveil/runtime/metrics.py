"""Prometheus metrics every service exports, and the /metrics endpoint."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics, start_http_server

# No ``_created`` series: nothing here reads them, and at a thousand tables they were half of
# the detectors' exposition, which takes the interpreter from the event loop for its duration.
disable_created_metrics()  # type: ignore[no-untyped-call]

EVENTS_CONSUMED = Counter("surveil_events_consumed_total", "Events a service took from a topic.", ["service", "topic"])
EVENTS_PRODUCED = Counter("surveil_events_produced_total", "Events a service published to a topic.", ["service", "topic"])
DEAD_LETTERS = Counter(
    "surveil_dead_letters_total", "Inputs rejected to the dead-letter topic, by where they came from.", ["service", "origin"]
)
DEVICE_SIGNATURES = Gauge(
    "surveil_device_signatures_enforced",
    "1 while the service checks its devices' signatures; 0 when DEVICE_SIGNATURES=off: any device message is taken, forged or not.",
    ["service"],
)
BATCH_SECONDS = Histogram(
    "surveil_batch_seconds",
    "Time to process and commit one batch of input events.",
    ["service"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)


def serve(port: int) -> None:
    """Expose the default registry on http://0.0.0.0:port/metrics (a daemon thread)."""
    start_http_server(port)
