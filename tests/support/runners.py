"""A Kafka runner without Kafka: its per-record path (``KafkaRunner._apply``) needs no client."""

from __future__ import annotations

from typing import Any
from unittest import mock

from surveil.events.signing import DeviceKeys
from surveil.runtime import kafka as runtime_kafka
from surveil.runtime.config import Settings
from surveil.runtime.kafka import KafkaRunner
from surveil.runtime.processor import Processor
from surveil.runtime.state import Backend


class NoClient:
    """Neither consumer nor producer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def init_transactions(self) -> None:
        pass


def runner_without_kafka(
    processor: Processor,
    backend: Backend,
    keys: DeviceKeys | None = None,
    partitions: int = 1,
    client: type = NoClient,
    gather_ms: int = 20,
) -> KafkaRunner:
    """A ``KafkaRunner`` built as the service builds it, with ``client`` for its consumer and producer."""
    settings = Settings(
        service=processor.name,
        kafka_bootstrap="none:9092",
        redis_url="redis://none",
        metrics_port=0,
        instance_id="test",
        log_level="CRITICAL",
        partitions=partitions,
        topic_prefix="",
        redis_prefix="",
        kafka_gather_ms=gather_ms,
    )
    with mock.patch.object(runtime_kafka, "KafkaConsumer", client), mock.patch.object(runtime_kafka, "KafkaProducer", client):
        return KafkaRunner(processor, settings, backend, keys)
