"""The table side live, on the real broker and Redis: a simulated floor's shoes over TCP to the
shoe-reader and its inputs on Kafka, the table-controller on the Kafka runner with its state in
Redis; what they publish validates and is exactly what ``surveil simulate`` records offline."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from integration.deployment import ROOT, Deployment, offline_events, validator
from surveil.events import codec, topics
from surveil.events import models as m
from surveil.runtime.config import Settings
from surveil.shoe_reader.service import published_sequences
from surveil.sim.floor import Floor
from surveil.sim.table import ShoeLine

FLOOR = {"tables": 2, "shoes": 1, "seed": 21}


def as_json(events: list[m.Event]) -> dict[str, dict]:
    return {event.id: json.loads(codec.encode(event)) for event in events}


def test_a_floor_plays_a_full_shoe_live_exactly_as_the_offline_log_says(deployment: Deployment) -> None:
    deployment.start("shoe-reader")
    deployment.start("table-controller")
    run = deployment.play(Floor(**FLOOR), pace=0.05)
    assert run.reconnects == 0
    for topic in (topics.SHOE, topics.TABLE):
        expected = offline_events(FLOOR, topic)
        live = deployment.read(topic, len(expected))
        assert len(live) == len({e.id for e in live}), "an event published twice"
        assert as_json(live) == as_json(expected), deployment.log_text()
        for event in live:
            validator(event.__struct_config__.tag).validate(json.loads(codec.encode(event)))  # type: ignore[attr-defined]
        for table in ("T001", "T002"):  # each table's events in the order the offline log has them
            assert [e.id for e in live if e.subject == table] == [e.id for e in expected if e.subject == table]
    assert [deployment.count(topic) for topic in topics.DEADLETTERS] == [0, 0, 0, 0]


def test_the_shoe_reader_publishes_a_capture_once_however_often_it_is_replayed(deployment: Deployment, tmp_path: Path) -> None:
    lines = [a.line for a in Floor(tables=2, shoes=1, seed=5).actions() if isinstance(a, ShoeLine)]
    capture = tmp_path / "floor.shoe"
    capture.write_bytes(b"".join(lines[:300]) + b"SHOE1 garbled\n")
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP": deployment.bootstrap,
        "TOPIC_PREFIX": deployment.topic_prefix,
        "REDIS_PREFIX": deployment.redis_prefix,
        "METRICS_PORT": str(deployment.metrics_ports["shoe-reader"]),
        "DEVICE_SIGNATURES": "off",  # the simulated shoes' lines, unsigned
    }

    def replay(path: Path) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "surveil.shoe_reader", "--capture", str(path)], env=env, cwd=ROOT, capture_output=True, timeout=120
        )
        assert done.returncode == 0, done.stderr.decode()[-3000:]

    replay(capture)
    first = deployment.read(topics.SHOE, 300)
    assert len(first) == 300
    settings = dataclasses.replace(
        Settings.from_env("shoe-reader"), kafka_bootstrap=deployment.bootstrap, topic_prefix=deployment.topic_prefix
    )
    last = published_sequences(settings)
    assert last == {table: max(int(e.id.rpartition(":")[2]) for e in first if e.subject == table) for table in ("T001", "T002")}
    capture.write_bytes(b"".join(lines))  # the whole floor now: the first 300 lines again, then the rest
    replay(capture)
    everything = deployment.read(topics.SHOE, len(lines))
    assert sorted(e.id for e in everything) == sorted({e.id for e in everything})
    assert len(everything) == len(lines)
    assert deployment.count(topics.deadletter_topic("shoe-reader")) == 1  # the garbled line of the first capture
