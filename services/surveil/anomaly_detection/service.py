"""Runs the faust worker of the anomaly-detection service, with its /metrics endpoint."""

from __future__ import annotations

import sys

from ..runtime import logs, metrics


def main() -> None:
    from .app import app, settings

    logs.configure(settings.service, settings.log_level)
    metrics.serve(settings.metrics_port)
    sys.argv = [sys.argv[0], "worker", "--loglevel", settings.log_level.lower(), "--without-web"]
    app.main()
