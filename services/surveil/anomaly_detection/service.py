"""Runs the faust worker of the anomaly-detection service, with its /metrics endpoint."""

from __future__ import annotations

import sys

from ..runtime import logs, metrics
from ..runtime.topic_admin import create_topics


def main() -> None:
    from .app import FACTS, PATTERN_ALERTS, SIGNER, app, settings

    logs.configure(settings.service, settings.log_level)
    if SIGNER is None:  # an unsigned alert proves nothing: docs/security.md, "Alert proof"
        raise SystemExit("refusing to start without the detectors' alert-signing key: ALERT_SIGNING_KEY (surveil keys alert-signing)")
    # The internal topics exist before the worker subscribes: one that faust creates on its first
    # send joins the subscription only at the next metadata refresh, five minutes on, and the
    # rebalance that this causes left the worker's streams stalled for good.
    create_topics(settings.kafka_bootstrap, [settings.topic(name) for name in (FACTS, PATTERN_ALERTS)], settings.partitions)
    metrics.serve(settings.metrics_port)
    # --quiet: no banner on stdout; the logs say what it would (JSON, runtime/logs.py).
    sys.argv = [sys.argv[0], "--quiet", "worker", "--loglevel", settings.log_level.lower(), "--without-web"]
    app.main()
