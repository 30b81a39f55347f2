"""A commit of the detectors' worker that waits past its bound (``COMMIT_TIMEOUT_S``) stops the
worker, saying why, instead of holding its streams back for good: its supervisor restarts it from
its last commit (anomaly_detection/transport.py)."""

from __future__ import annotations

import time

from integration.deployment import Deployment, offline_events

SERVICE = "anomaly-detection"


def test_a_commit_past_its_bound_stops_the_worker_and_says_why(deployment: Deployment) -> None:
    deployment.env["COMMIT_TIMEOUT_S"] = "0.000001"  # no broker acknowledges a changelog value that fast
    worker = deployment.start(SERVICE)
    deployment.publish(offline_events({"tables": 1, "shoes": 1, "seed": 7})[:200])
    deadline = time.monotonic() + 120
    while worker.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    log = deployment.log_tail(SERVICE, lines=400)
    assert worker.poll() not in (None, 0), f"the worker went on (exit {worker.poll()})\n{log}"
    assert "stopping the worker, to be restarted from its last commit" in log, log
