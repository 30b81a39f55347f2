"""A Kafka runner times how long each input waited before its batch took it up: since the event's
time at the table, and since its publisher's send (the record's timestamp)."""

from __future__ import annotations

from datetime import UTC, datetime
from unittest import mock

from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from prometheus_client import REGISTRY

from support.runners import runner_without_kafka
from support.scenario import Scenario
from surveil.events import codec, topics
from surveil.runtime import kafka as runtime_kafka
from surveil.runtime.state import MemoryBackend
from surveil.settlement.processor import SettlementProcessor

TAKEN = 1_800_000_000.0  # when the batch starts


def _record(offset: int, sent: float, value: bytes) -> ConsumerRecord:
    return ConsumerRecord(topics.TABLE, 0, -1, offset, round(sent * 1000), 0, b"T01", value, [], None, 3, len(value), 0)


def _bucket(metric: str, le: str) -> float:
    labels = {"service": "settlement", "topic": topics.TABLE, "le": le}
    return REGISTRY.get_sample_value(f"{metric}_bucket", labels) or 0.0


def test_each_input_is_timed_from_its_event_and_from_its_send_to_its_batch() -> None:
    runner = runner_without_kafka(SettlementProcessor(), MemoryBackend())
    play = Scenario(shoe_id="T01-S1", clock=datetime.fromtimestamp(TAKEN - 0.3 - 20, UTC))  # a round opens 20 s on: 300 ms before the batch
    play.open_round()
    wanted = [
        ("surveil_intake_latency_seconds", "0.25"),
        ("surveil_intake_latency_seconds", "0.5"),
        ("surveil_intake_latency_seconds", "+Inf"),
        ("surveil_intake_queue_latency_seconds", "0.015"),
        ("surveil_intake_queue_latency_seconds", "0.02"),
        ("surveil_intake_queue_latency_seconds", "+Inf"),
    ]
    before = [_bucket(*bucket) for bucket in wanted]
    batch = {
        TopicPartition(topics.TABLE, 0): [
            _record(7, sent=TAKEN - 0.018, value=codec.encode(play.events[-1])),  # sent 18 ms before the batch
            _record(8, sent=TAKEN - 0.018, value=b"not an event"),  # no event time: timed from its send only
        ]
    }
    with mock.patch.object(runtime_kafka.time, "time", return_value=TAKEN):
        runner._apply(batch)
    gained = [_bucket(*bucket) - was for bucket, was in zip(wanted, before)]
    assert gained == [0.0, 1.0, 1.0, 0.0, 2.0, 2.0]
