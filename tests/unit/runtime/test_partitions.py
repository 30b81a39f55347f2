"""The partition a service writes a keyed record to: its key's by murmur2, as every producer of the
keyed topics puts it, with the topic's partition count asked of the producer once."""

from __future__ import annotations

from typing import Any
from unittest import mock

from kafka.partitioner.default import murmur2

from surveil.runtime import kafka as runtime_kafka
from surveil.runtime.config import Settings
from surveil.runtime.kafka import KafkaRunner, partition_for
from surveil.runtime.state import MemoryBackend
from surveil.settlement.processor import SettlementProcessor

KEYS = [b"T01", b"table-0042", "百家乐-7".encode(), b"x" * 1024, b""]


class _Client:
    """The runner's consumer and producer: the producer knows each topic's partition count, and
    counts how often it was asked."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.asked: list[str] = []

    def init_transactions(self) -> None:
        pass

    def partitions_for(self, topic: str) -> set[int]:
        self.asked.append(topic)
        return set(range({"a": 6, "b": 4}[topic]))


def test_a_key_goes_where_murmur2_puts_it_for_each_partition_count_asked_again_or_not() -> None:
    for _ in range(2):
        for key in KEYS:
            for partitions in (1, 4, 6):
                assert partition_for(key, partitions) == (murmur2(key) & 0x7FFFFFFF) % partitions


def test_the_runner_asks_a_topics_partition_count_once_and_partitions_each_key_by_it() -> None:
    settings = Settings(
        service="settlement",
        kafka_bootstrap="none:9092",
        redis_url="redis://none",
        metrics_port=0,
        instance_id="test",
        log_level="CRITICAL",
        partitions=6,
    )
    with mock.patch.object(runtime_kafka, "KafkaConsumer", _Client), mock.patch.object(runtime_kafka, "KafkaProducer", _Client):
        runner = KafkaRunner(SettlementProcessor(), settings, MemoryBackend())
    for _ in range(3):
        for key in KEYS:
            assert runner._partition("a", key) == partition_for(key, 6)
            assert runner._partition("b", key) == partition_for(key, 4)
    assert runner.producer.asked == ["a", "b"]
