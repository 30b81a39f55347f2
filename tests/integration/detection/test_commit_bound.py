"""A commit of the detectors' worker that waits past its bound (``COMMIT_TIMEOUT_S``) stops the
worker, saying why, instead of holding its streams back for good: its supervisor restarts it from
its last commit; and one that waits says, while it waits, what for and where
(anomaly_detection/transport.py)."""

from __future__ import annotations

import time

import pytest
from kafka.errors import KafkaError

from integration.deployment import Deployment, offline_events
from surveil.events import topics

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


def test_a_commit_waiting_on_a_frozen_broker_says_what_it_waits_for_and_where(deployment: Deployment, kafka_broker) -> None:  # type: ignore[no-untyped-def]
    if not kafka_broker.can_freeze:
        pytest.skip("the broker is neither a testcontainer nor the one ops/stack.sh runs: the test cannot freeze it")
    deployment.start(SERVICE)
    events = offline_events({"tables": 1, "shoes": 1, "seed": 7})
    deployment.publish(events[:100])
    deployment.wait_until_consumed(SERVICE, timeout_s=120)
    # Frozen as soon as the worker has processed new events, before its next commit (a second
    # apart: COMMIT_INTERVAL_MS) has written their tables: that commit waits on the broker. Should the commit slip in
    # before the freeze, there is nothing to commit while frozen; the next round tries again.
    log = ""
    for start in range(100, 400, 100):
        before = processed(deployment)
        deployment.publish(events[start : start + 100])
        deadline = time.monotonic() + 60
        while processed(deployment) == before and time.monotonic() < deadline:
            time.sleep(0.02)
        with kafka_broker.frozen():
            time.sleep(8)
        until_serving(deployment)
        log = deployment.log_tail(SERVICE, lines=400)
        if "a commit has waited" in log:
            break
    waits = [line for line in log.splitlines() if "a commit has waited" in line]
    assert waits, f"no commit said it waited\n{log}"
    line = waits[0]
    assert "anomaly_detection/transport.py" in line and "_commit_offsets" in line and "aiokafka/" in line, line
    assert "the consumer's group coordinator" in line and "metadata task running" in line, line  # its clients' state
    if "for the tables' changelog" in line:  # as a rule: the commit writes the tables first, for most of its time
        assert "anomaly_detection/app.py" in line and "_write_changed" in line, line
    else:
        assert "for the offsets' commit" in line, line
    deployment.wait_until_consumed(SERVICE, timeout_s=120)  # and it goes on once the broker is back


def until_serving(deployment: Deployment, timeout_s: float = 60) -> None:
    """Until the thawed broker serves its partitions again. Frozen past its session timeout
    (3 s), it is fenced by its own controller when thawed, and its partitions are offline until
    its next heartbeat (0.5 s) and the controller unfence it."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            deployment.end_offsets(topics.SHOE)
            return
        except KafkaError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def processed(deployment: Deployment) -> float:
    """The events the worker processed, by its /metrics."""
    return sum(value for name, _, value in deployment.metric_samples(SERVICE) if name == "surveil_detection_latency_seconds_count")
