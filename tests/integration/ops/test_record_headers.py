"""Every record the system writes says what its value is, in the ``content-type`` header of the
CloudEvents Kafka protocol binding (docs/contract.md): read back from the real broker after the
four services ran a floor and refused malformed input. Events (the shoe-reader's, the floor's
inputs through the ``Publisher``, the runners' outputs, faust's alerts) are
``application/cloudevents+json``; dead letters (a runner's, faust's) ``application/json``;
anomaly-detection's own facts and table values ``application/vnd.msgpack``. And every line each
service logged, its libraries' (kafka-python, aiokafka, faust, mode) included, is JSON with the
service's name (runtime/logs.py)."""

from __future__ import annotations

import json
import time
from collections import Counter

from integration.deployment import Deployment
from surveil.events import topics
from surveil.sim.floor import Floor
from surveil.sim.injections import parse_codes

CLOUDEVENT = b"application/cloudevents+json"


def content_types(deployment: Deployment, name: str) -> Counter[bytes | None]:
    """How many records of the topic carry each content type (None: no header), once each."""
    found: Counter[bytes | None] = Counter()
    for record in deployment.records(name):
        values = [value for key, value in record.headers or () if key == "content-type"]
        assert len(values) <= 1, f"{name} offset {record.offset}: {values}"
        found[values[0] if values else None] += 1
    return found


def test_every_record_carries_its_content_type(deployment: Deployment) -> None:
    deployment.start_all()
    deployment.play(Floor(tables=2, shoes=1, seed=3, inject=parse_codes("CARD_EXPOSED,LATE_BET")), 0.05)
    # Malformed input on the table stream: settlement's runner and the detectors (faust) refuse it.
    deployment.publish_raw([(b"T01", b"not an event")], topic=topics.TABLE)
    deployment.wait_until_consumed("settlement", timeout_s=120)
    deployment.wait_until_consumed("anomaly-detection", timeout_s=120)
    deadline = time.monotonic() + 60
    refusers = [topics.deadletter_topic(service) for service in ("settlement", "anomaly-detection")]
    while sum(sum(content_types(deployment, name).values()) for name in refusers) < 2 and time.monotonic() < deadline:
        time.sleep(1)

    for name in (topics.SHOE, topics.INPUTS, topics.SETTLEMENT, topics.ALERTS):
        found = content_types(deployment, name)
        assert set(found) == {CLOUDEVENT} and found[CLOUDEVENT] > 0, (name, found)
    table = content_types(deployment, topics.TABLE)
    assert table[None] == 1 and set(table) == {CLOUDEVENT, None}  # only the test's own malformed record lacks it
    for name in refusers:
        dead = deployment.records(name)
        assert len(dead) == 1 and {record.headers and dict(record.headers)["content-type"] for record in dead} == {b"application/json"}, (
            name
        )
    facts = content_types(deployment, "anomaly-detection-facts")
    watch = content_types(deployment, "anomaly-detection-table-watch-changelog")
    assert set(facts) == set(watch) == {b"application/vnd.msgpack"}, (facts, watch)

    deployment.stop_all()
    for service in ("shoe-reader", "table-controller", "settlement", "anomaly-detection"):
        text = (deployment.logs / f"{service}-1.log").read_text()
        lines = [json.loads(line) for line in text.splitlines()]  # fails on any line that is not JSON
        assert {line["service"] for line in lines} == {service}
        loggers = {line.get("logger", "").split(".")[0] for line in lines}
        assert "kafka" in loggers or "aiokafka" in loggers, (service, loggers)
        if service == "anomaly-detection":
            assert {"faust", "aiokafka"} <= loggers, loggers
