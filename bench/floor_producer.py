"""The simulated floor's devices: their Kafka client, and their records made before play.

A table's devices (its shoe's gateway, its betting console) are not the services, and their
Kafka client is theirs to choose. The benchmarks play a whole floor's devices from one process on
the machine the pipeline runs on, so what that process spends is taken from the services: through
kafka-python it spent 9.7 - 11.3 ms of CPU a round at 1,000 tables, most of it in kafka-python's I/O
thread. librdkafka (confluent-kafka) sends the same records for a fifth of the CPU a record
(docs/performance.md, "The simulated floor"). The services keep kafka-python.

``DeviceProducer`` is what ``Publisher`` needs of a producer (``send``, ``flush``, ``close``), with
the settings of the services' own producers (``producer_config``, translated), each record on the
partition ``partition_for`` gives its key, as every producer of the keyed topics. A record the
broker refuses fails the next ``send`` or ``flush``: the client calls back into Python for those
alone (``delivery.report.only.error``), not for each record delivered, and each key's partition is
computed once (docs/performance.md, "The simulated floor").

A device encodes and signs what it sends on its own hardware. The benchmarks' floor does that for
every record before play (``made_ahead``), so that during play it only sends: its shoe lines
signed, its inputs encoded with their signature headers, each record sent at its time as before.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaException, Producer

from surveil.events import codec, topics
from surveil.events.models import Event
from surveil.events.shoe_protocol import signed_line
from surveil.events.signing import DeviceKeys
from surveil.runtime.config import Settings
from surveil.runtime.kafka import Publisher, partition_for, producer_config
from surveil.sim.table import Action, ShoeLine, TableInput

# kafka-python's settings (``producer_config``, and in it ``Settings.kafka_client``, where how a
# client proves who it is gets decided) by librdkafka's names; None: nothing to set (librdkafka
# keeps no statistics unless asked). One not in the table fails here, never silently.
LIBRDKAFKA_NAMES: dict[str, str | None] = {
    "bootstrap_servers": "bootstrap.servers",
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "ssl_cafile": "ssl.ca.location",
    "ssl_check_hostname": "ssl.endpoint.identification.algorithm",
    "metrics_enabled": None,
    "acks": "acks",
    "enable_idempotence": "enable.idempotence",
    "linger_ms": "linger.ms",
    "batch_size": "batch.size",
    "retries": "retries",
    "delivery_timeout_ms": "message.timeout.ms",
    "max_request_size": "message.max.bytes",
    "client_id": "client.id",
    "fetch_max_wait_ms": "fetch.wait.max.ms",
    "fetch_min_bytes": "fetch.min.bytes",
}


def librdkafka_config(kafka_python: dict[str, Any]) -> dict[str, Any]:
    """``kafka_python``'s settings in librdkafka's names."""
    config: dict[str, Any] = {}
    for name, value in kafka_python.items():
        translated = LIBRDKAFKA_NAMES[name]
        if translated is None or value is None:
            continue
        if name == "ssl_check_hostname":
            value = "https" if value else "none"
        config[translated] = value
    return config


class DeviceProducer:
    def __init__(self, settings: Settings, **librdkafka_overrides: Any) -> None:
        self.failures: list[str] = []
        self._partitions: dict[str, int] = {}
        self._partition_of: dict[tuple[str, bytes], int] = {}  # (topic, key): one a table
        reports = {"delivery.report.only.error": True, "on_delivery": self._delivered}  # of refused records
        self._producer = Producer(librdkafka_config(producer_config(settings)) | reports | librdkafka_overrides)

    def prepare(self, *names: str) -> None:
        """Connect, and learn the partitions of the topics ``names`` (their full names), now
        rather than at their first records: a wrong password or a missing topic fails here."""
        for name in names:
            self._partition_count(name)

    def send(self, topic: str, key: bytes, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        self._raise_failures()
        partition = self._partition_of.get((topic, key))
        if partition is None:
            partition = self._partition_of[topic, key] = partition_for(key, self._partition_count(topic))
        while True:
            try:
                self._producer.produce(topic, value, key, partition=partition, headers=headers)
                break
            except BufferError:  # its queue is full (a floor played as fast as it goes): let some out
                self._producer.poll(0.05)
                self._raise_failures()
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

    def _raise_failures(self) -> None:
        if self.failures:
            raise KafkaException(f"{len(self.failures)} refused, the first: {self.failures[0]}")

    def flush(self, timeout: float = 180) -> None:
        """Wait until every record is acknowledged; raise if one was refused or is still unsent
        after ``timeout`` s (past the delivery timeout, librdkafka has given up on it)."""
        left = self._producer.flush(timeout)
        self._raise_failures()
        if left:
            raise KafkaException(f"{left} records not sent after {timeout} s")

    def close(self) -> None:
        self.flush()


def floor_publisher(settings: Settings, keys: DeviceKeys, **librdkafka_overrides: Any) -> Publisher:
    """A ``Publisher`` of the floor's devices (their inputs, signed with ``keys``) over librdkafka,
    connected."""
    producer = DeviceProducer(settings, **librdkafka_overrides)
    producer.prepare(settings.topic(topics.INPUTS))
    return Publisher(settings, keys, producer=producer)


class MadeAhead:
    """A ``Publisher``'s records made before play: ``publish`` sends the next one made, which must
    be the one made of the event it is handed (play_live hands them in the order of the actions)."""

    def __init__(self, publisher: Publisher, events: Iterable[Event]) -> None:
        self.producer = publisher.producer
        self.records: deque[tuple[str, str, bytes, bytes, list[tuple[str, bytes]]]] = deque()
        for event in events:
            key, value = event.subject.encode(), codec.encode(event)
            headers = publisher.headers(event.topic, key, value)
            self.records.append((event.id, publisher.topic_prefix + event.topic, key, value, headers))

    def publish(self, event: Event) -> None:
        made_of, topic, key, value, headers = self.records.popleft()
        if made_of != event.id:
            raise RuntimeError(f"the record made ahead is of {made_of}, not of {event.id}: the inputs came out of order")
        self.producer.send(topic, key=key, value=value, headers=headers)

    def flush(self) -> None:
        self.producer.flush()

    def close(self) -> None:
        self.producer.close()


def made_ahead(actions: list[Action], publisher: Publisher, keys: DeviceKeys) -> tuple[list[Action], MadeAhead]:
    """``actions`` with their shoe lines signed, and a publisher of their inputs, made ahead."""
    signed = [dataclasses.replace(a, line=signed_line(a.line, keys)) if isinstance(a, ShoeLine) else a for a in actions]
    return signed, MadeAhead(publisher, (a.event for a in actions if isinstance(a, TableInput)))
