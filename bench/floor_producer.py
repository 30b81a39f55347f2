"""The simulated floor's Kafka client: the devices' side of the broker, not a service's.

A table's devices (its shoe's gateway, its betting console) are not the services, and their
Kafka client is theirs to choose. The benchmarks play a whole floor's devices from one process on
the machine the pipeline runs on, so what that process spends is taken from the services: through
kafka-python it spent 10 - 11 ms of CPU a round at 1,000 tables, most of it in kafka-python's I/O
thread. librdkafka (confluent-kafka) sends the same records for a fifth of the CPU a record
(docs/performance.md, "The simulated floor"). The services keep kafka-python.

``DeviceProducer`` is what ``Publisher`` needs of a producer (``send``, ``flush``, ``close``):
idempotent, every in-sync replica acknowledging, each record on the partition ``partition_for``
gives its key (as every producer of the keyed topics), lingering ``KAFKA_LINGER_MS`` as the
services' producers outside a transaction. A record the broker did not take fails ``flush``.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaException, Producer

from surveil.events import topics
from surveil.events.signing import DeviceKeys
from surveil.runtime.config import Settings
from surveil.runtime.kafka import Publisher, partition_for

# kafka-python's keyword arguments (``Settings.kafka_client``, where how a client proves who it
# is gets decided) by librdkafka's names. One it does not know fails here, never silently.
LIBRDKAFKA_NAMES = {
    "bootstrap_servers": "bootstrap.servers",
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "ssl_cafile": "ssl.ca.location",
}


def librdkafka_config(settings: Settings) -> dict[str, Any]:
    """librdkafka's settings for reaching the broker as ``settings``' principal."""
    config: dict[str, Any] = {}
    for name, value in settings.kafka_client().items():
        if name == "ssl_check_hostname":
            config["ssl.endpoint.identification.algorithm"] = "https" if value else "none"
        elif value is not None:
            config[LIBRDKAFKA_NAMES[name]] = value
    return config


class DeviceProducer:
    def __init__(self, settings: Settings, **overrides: Any) -> None:
        self.failures: list[str] = []
        self._partitions: dict[str, int] = {}
        self._producer = Producer(
            librdkafka_config(settings)
            | {
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": settings.kafka_linger_ms,
                "message.max.bytes": topics.MAX_RECORD_BYTES,
                "client.id": f"{settings.service}-{settings.instance_id}",
            }
            | overrides
        )

    def send(self, topic: str, key: bytes, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        partition = partition_for(key, self._partition_count(topic))
        while True:
            try:
                self._producer.produce(topic, value, key, partition=partition, headers=headers, on_delivery=self._delivered)
                break
            except BufferError:  # its queue is full (a floor played as fast as it goes): let some out
                self._producer.poll(0.05)
        self._producer.poll(0)  # delivery reports of earlier records

    def _partition_count(self, topic: str) -> int:
        if topic not in self._partitions:
            found = self._producer.list_topics(topic, timeout=30).topics[topic]
            if found.error is not None:
                raise KafkaException(found.error)
            self._partitions[topic] = len(found.partitions)
        return self._partitions[topic]

    def _delivered(self, error: Any, record: Any) -> None:
        if error is not None:
            self.failures.append(f"{record.topic()} key {record.key()!r}: {error}")

    def flush(self, timeout: float = 120) -> None:
        left = self._producer.flush(timeout)
        if left or self.failures:
            raise KafkaException(f"{left} records not sent after {timeout} s; {len(self.failures)} refused, the first: {self.failures[:1]}")

    def close(self) -> None:
        self.flush()


def floor_publisher(settings: Settings, keys: DeviceKeys, **overrides: Any) -> Publisher:
    """A ``Publisher`` of the floor's devices (signing with ``keys``) over librdkafka."""
    return Publisher(settings, keys, producer=DeviceProducer(settings, **overrides))
