"""kill -9 of each table-side service in the middle of a shoe, then a restart: the shoe and table
topics end up with exactly the events of an uninterrupted run (the offline log for the same seed),
by id and content: none missing, none twice."""

from __future__ import annotations

import json
import time

import pytest

from integration.deployment import Deployment, offline_events
from surveil.events import codec, topics
from surveil.sim.floor import Floor

FLOOR = {"tables": 2, "shoes": 1, "seed": 33}
PACE = 0.25  # seconds per round: a shoe of ~75 rounds takes ~20 s


def wait_for(condition, timeout: float = 120, what: str = "") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.1)


def assert_same_as_uninterrupted(side: Deployment) -> None:
    for topic in (topics.SHOE, topics.TABLE):
        expected = offline_events(FLOOR, topic)
        live = side.read(topic, len(expected))
        ids = [e.id for e in live]
        duplicated = sorted({i for i in ids if ids.count(i) > 1})
        missing = sorted({e.id for e in expected} - set(ids))
        assert (duplicated, missing) == ([], []), f"{topic}: twice {duplicated[:5]}, missing {missing[:5]}\n{side.log_text()}"
        assert {e.id: json.loads(codec.encode(e)) for e in live} == {e.id: json.loads(codec.encode(e)) for e in expected}
        for table in ("T001", "T002"):
            assert [e.id for e in live if e.subject == table] == [e.id for e in expected if e.subject == table]


@pytest.mark.parametrize(("service", "topic", "after"), [("shoe-reader", topics.SHOE, 250), ("table-controller", topics.TABLE, 400)])
def test_a_service_killed_mid_shoe_and_restarted_publishes_every_event_once(
    deployment: Deployment, service: str, topic: str, after: int
) -> None:
    deployment.start("shoe-reader")
    deployment.start("table-controller")
    thread, outcome = deployment.play_in_background(Floor(**FLOOR), PACE)
    wait_for(lambda: deployment.count(topic) >= after, what=f"{after} records on {topic}")
    deployment.kill(service)
    # Mid-shoe: the shoe still sending, or the controller's table events not all out yet.
    assert thread.is_alive() if service == "shoe-reader" else deployment.count(topic) < len(offline_events(FLOOR, topic)), "too late"
    time.sleep(1.0)
    deployment.start(service)
    thread.join(timeout=300)
    assert not thread.is_alive() and "error" not in outcome, outcome
    if service == "shoe-reader":
        assert outcome["run"].reconnects >= 1
    assert_same_as_uninterrupted(deployment)
