"""The consumer lag of the services' consumer groups, for Prometheus: ``surveil serve lag-exporter``.

The broker's own JMX metrics are not exposed in this deployment, so lag is measured from the
outside, as ``kafka-consumer-groups --describe`` does: every few seconds (``LAG_INTERVAL``, 5 s)
the exporter reads each group's committed offsets (KafkaAdminClient) and the end offsets of the
topics it consumes (a group-less KafkaConsumer), and exports per partition

    surveil_consumer_lag_messages{group, topic, partition} = end offset - committed offset

on ``METRICS_PORT`` (default 9105). Group and topic are named without ``TOPIC_PREFIX``, so rules
and dashboards do not depend on the deployment's prefix.

- The end offset is read ``read_committed`` (the last stable offset), as the services consume:
  records of a transaction still open are not lag yet.
- A partition the group has not committed anything for yet counts from its earliest offset
  (the services start at ``earliest``): a group that never ran shows its whole backlog.
- The services publish in transactions, and each committed transaction leaves a marker record
  behind the last event; the consumer's committed offset stops before the marker, so a partition
  that is fully caught up shows a lag of 1. Thresholds are in the hundreds; this is not lag.

``surveil_lag_exporter_last_success_timestamp_seconds`` says when offsets were last read in full,
``surveil_lag_exporter_errors_total`` counts the polls that failed (broker unreachable, ...): a
stale lag is not a zero lag, and the alerting rules tell the two apart.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import Counter, Gauge

from ..events import topics
from ..events.topics import INPUTS
from . import logs, metrics
from .config import UNMETERED, Settings, kafka_client_config

SERVICE = "lag-exporter"
DEFAULT_INTERVAL = 5.0  # seconds between polls; Prometheus scrapes every 5 s

# The consumer groups (named after their processor; faust's app id for anomaly-detection) and the
# topics each consumes. Topics a group committed offsets for are added to these.
GROUPS: dict[str, tuple[str, ...]] = {
    "table-controller": (topics.SHOE, INPUTS),
    "settlement": (topics.TABLE,),
    "anomaly-detection": (topics.SHOE, topics.TABLE, topics.SETTLEMENT, "anomaly-detection-facts"),
}

LAG = Gauge(
    "surveil_consumer_lag_messages",
    "Messages in a partition that the consumer group has not committed yet (end offset, read_committed, minus committed offset).",
    ["group", "topic", "partition"],
)
LAST_SUCCESS = Gauge(
    "surveil_lag_exporter_last_success_timestamp_seconds",
    "When the exporter last read every group's committed offsets and the topics' end offsets (Unix time).",
)
ERRORS = Counter("surveil_lag_exporter_errors_total", "Polls of the broker that failed (the lag then stays as last read).")

Partition = tuple[str, int]  # topic (on the broker), partition


def partition_lag(committed: int | None, earliest: int, latest: int) -> int:
    """Messages between the group's position and the end of a partition.

    >>> partition_lag(committed=90, earliest=0, latest=100)
    10
    >>> partition_lag(committed=None, earliest=40, latest=100)  # nothing committed: from the start
    60
    >>> partition_lag(committed=10, earliest=40, latest=100)  # below retention: reset to earliest
    60
    """
    position = earliest if committed is None or committed < earliest else committed
    return max(latest - position, 0)


class LagReader:
    """Reads the lag of every group in ``groups`` (names without the prefix) from one broker."""

    def __init__(
        self, bootstrap: str, prefix: str = "", groups: Mapping[str, Iterable[str]] = GROUPS, client: Mapping[str, Any] | None = None
    ) -> None:
        """``client``: kafka-python's security arguments (``Settings.kafka_client``); by default
        the credentials in the environment (``config.kafka_client_config``)."""
        from kafka import KafkaAdminClient, KafkaConsumer

        self.prefix = prefix
        self.groups = {group: tuple(topics) for group, topics in groups.items()}
        config = {**(kafka_client_config() if client is None else client), "bootstrap_servers": bootstrap}
        self.admin = KafkaAdminClient(**config, client_id=f"{prefix}{SERVICE}")
        self.consumer = KafkaConsumer(
            **config,
            **UNMETERED,
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
            client_id=f"{prefix}{SERVICE}",
        )

    def close(self) -> None:
        self.consumer.close()
        self.admin.close()

    def read(self) -> dict[tuple[str, str, int], int]:
        """``{(group, topic, partition): lag}``, group and topic without the prefix."""
        from kafka import TopicPartition

        committed = self.admin.list_group_offsets({self.prefix + group: None for group in self.groups})
        wanted: dict[str, set[Partition]] = {}
        for group, consumed in self.groups.items():
            offsets = committed.get(self.prefix + group, {})
            names = {self.prefix + topic for topic in consumed} | {tp.topic for tp in offsets}
            wanted[group] = {(name, p) for name in names for p in self.consumer.partitions_for_topic(name) or ()}
        tps = sorted({TopicPartition(*tp) for tps in wanted.values() for tp in tps})
        if not tps:
            return {}
        earliest = self.consumer.beginning_offsets(tps)
        latest = self.consumer.end_offsets(tps)
        lag = {}
        for group, partitions in wanted.items():
            offsets = committed.get(self.prefix + group, {})
            for topic, partition in partitions:
                tp = TopicPartition(topic, partition)
                done = offsets.get(tp)
                done_at = done.offset if done is not None and done.offset >= 0 else None
                lag[(group, topic.removeprefix(self.prefix), partition)] = partition_lag(done_at, earliest[tp], latest[tp])
        return lag


def publish(lag: Mapping[tuple[str, str, int], int], previous: Iterable[tuple[str, str, int]]) -> None:
    """Set the gauge to ``lag``, removing the partitions that are gone since ``previous``."""
    for group, topic, partition in set(previous) - set(lag):
        LAG.remove(group, topic, str(partition))
    for (group, topic, partition), value in lag.items():
        LAG.labels(group, topic, str(partition)).set(value)


def run(reader: LagReader, interval: float, stop: threading.Event, log: Any) -> None:
    """Poll until ``stop`` is set; a failed poll is counted and logged, and the next one tries again."""
    previous: Iterable[tuple[str, str, int]] = ()
    while True:
        try:
            lag = reader.read()
        except Exception as error:  # the broker away, a coordinator moving: try again next time
            ERRORS.inc()
            log.warning("reading offsets failed", error=f"{type(error).__name__}: {error}")
        else:
            publish(lag, previous)
            previous = list(lag)
            LAST_SUCCESS.set(time.time())
        if stop.wait(interval):
            return


def main() -> None:
    settings = Settings.from_env(SERVICE)
    log = logs.configure(SERVICE, settings.log_level)
    port = settings.metrics_port
    interval = float(os.environ.get("LAG_INTERVAL", DEFAULT_INTERVAL))
    metrics.serve(port)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    reader = LagReader(settings.kafka_bootstrap, settings.topic_prefix, client=settings.kafka_client())
    log.info("started", port=port, interval=interval, groups=sorted(GROUPS), bootstrap=settings.kafka_bootstrap)
    try:
        run(reader, interval, stop, log)
    finally:
        reader.close()
        log.info("stopped")
