"""The benchmarks' simulated devices (bench/floor_producer.py: librdkafka, not kafka-python) feed
the table side on the real broker exactly as the services' ``Publisher`` does: each input signed
as its console, on the partition ``partition_for`` gives its table (the partition every other
producer of the keyed topics picks), and what the table-controller makes of them is the offline
log's. A record the broker refuses fails the producer's flush."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from integration.deployment import Deployment, offline_events
from surveil.events import codec, topics
from surveil.events.signing import HEADER
from surveil.runtime.access import FLOOR_SIMULATOR
from surveil.runtime.kafka import partition_for
from surveil.sim.floor import Floor
from surveil.sim.table import TableInput

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from floor_producer import DeviceProducer, floor_publisher  # noqa: E402

FLOOR = {"tables": 3, "shoes": 1, "seed": 8}


def test_the_simulated_devices_feed_the_table_side_as_the_publisher_does(deployment: Deployment) -> None:
    deployment.start("shoe-reader")
    deployment.start("table-controller")
    devices = floor_publisher(deployment.client_settings(FLOOR_SIMULATOR), deployment.device_keys())
    try:
        deployment.play(Floor(**FLOOR), pace=0.02, inputs=lambda _kafka_python: devices)
    finally:
        devices.close()

    expected = [action.event for action in Floor(**FLOOR).actions() if isinstance(action, TableInput)]
    inputs = deployment.records(topics.INPUTS)
    assert sorted(codec.decode(record.value).id for record in inputs) == sorted(event.id for event in expected)
    partitions = len(deployment.partitions(topics.INPUTS))
    for record in inputs:
        assert record.partition == partition_for(record.key, partitions), record.key
        assert HEADER in dict(record.headers or ())
    table = offline_events(FLOOR, topics.TABLE)
    live = deployment.read(topics.TABLE, len(table))
    for table_id in ("T001", "T002", "T003"):
        assert [e.id for e in live if e.subject == table_id] == [e.id for e in table if e.subject == table_id]
    assert [deployment.count(topic) for topic in topics.DEADLETTERS] == [0, 0, 0, 0]


def test_a_record_the_broker_refuses_fails_the_flush(deployment: Deployment) -> None:
    # Told it may send 4 MiB, the client lets a 2 MiB record go; the broker takes at most 1 MiB.
    producer = DeviceProducer(deployment.client_settings(FLOOR_SIMULATOR), **{"message.max.bytes": 4 * 1024 * 1024})
    producer.send(deployment.topic(topics.INPUTS), b"T001", b"x" * (2 * 1024 * 1024), [])
    with pytest.raises(KafkaException, match="1 refused"):
        producer.flush(timeout=30)
