"""The partition a service writes a keyed record to: its key's by murmur2, as every producer of the
keyed topics puts it, with the topic's partition count asked of the producer once."""

from __future__ import annotations

from typing import Any

from kafka.partitioner.default import murmur2

from support.runners import runner_without_kafka
from surveil.runtime.kafka import partition_for
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
    runner = runner_without_kafka(SettlementProcessor(), MemoryBackend(), partitions=6, client=_Client)
    for _ in range(3):
        for key in KEYS:
            assert runner._partition("a", key) == partition_for(key, 6)
            assert runner._partition("b", key) == partition_for(key, 4)
    assert runner.producer.asked == ["a", "b"]
