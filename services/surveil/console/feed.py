"""The console's Kafka side: a thread that reads the topics and hands the events to the event
loop, and the producer of ``baccarat.alert-actions``.

kafka-python, as for the other services' shells, made from the runtime's ``Settings`` (so the
console logs in as its own principal). The consumer has no group: partitions are assigned, the
alerts and their actions are read from the start of their topics and the floor's topics from
``CONSOLE_HISTORY_HOURS`` back, on every start; so a restarted console shows what it showed
before, with nothing of its own to keep. Records that are not contract events, or not of their
topic, are skipped, logged and counted: the services that consume those topics put them in the
dead letters already.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import structlog
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError
from prometheus_client import Counter, Gauge

from ..events import codec, models, topics
from ..runtime.config import UNMETERED, Settings

READ_ALL = (topics.ALERTS, topics.ALERT_ACTIONS)  # from the start of the topic
READ_RECENT = (topics.SHOE, topics.TABLE, topics.SETTLEMENT)  # from history_hours back

RECORDS = Counter("surveil_console_records_total", "Records the console read, by topic.", ["topic"])
SKIPPED = Counter("surveil_console_records_skipped_total", "Records the console could not use, by topic.", ["topic"])
CAUGHT_UP = Gauge("surveil_console_caught_up", "1 once the console has read its topics up to where they were when it started.")

log = structlog.get_logger()

Batch = list[models.Event]


class Feed(threading.Thread):
    """Reads the topics and calls ``deliver(batch)`` (thread-safe: the caller makes it so) with
    each poll's events, in each partition's order; ``caught_up()`` once, when it has read up to
    the end offsets it found on start."""

    def __init__(
        self,
        settings: Settings,
        deliver: Callable[[Batch], None],
        caught_up: Callable[[], None],
        history_hours: float,
        *,
        poll_ms: int = 100,
    ) -> None:
        super().__init__(name="console-feed", daemon=True)
        self.settings = settings
        self.deliver, self.on_caught_up = deliver, caught_up
        self.history = timedelta(hours=history_hours)
        self.poll_ms = poll_ms
        self.stopping = threading.Event()
        self.ready = threading.Event()  # set once the consumer is assigned and positioned
        self.error: BaseException | None = None
        self._topic_of = {settings.topic(t): t for t in (*READ_ALL, *READ_RECENT)}

    def stop(self) -> None:
        self.stopping.set()

    def _consumer(self) -> tuple[KafkaConsumer, dict[TopicPartition, int]]:
        consumer = KafkaConsumer(
            **self.settings.kafka_client(),
            **UNMETERED,
            client_id=f"console-{self.settings.instance_id}",
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=self.poll_ms,
            max_poll_records=5000,
        )
        partitions: list[TopicPartition] = []
        for name in self._topic_of:
            found = None
            deadline = time.monotonic() + 30
            while not found and time.monotonic() < deadline:
                found = consumer.partitions_for_topic(name)
                if not found:
                    time.sleep(0.5)
            if not found:
                raise KafkaError(f"topic {name} not found")
            partitions += [TopicPartition(name, p) for p in sorted(found)]
        consumer.assign(partitions)
        since_ms = int((datetime.now(UTC) - self.history).timestamp() * 1000)
        recent = [tp for tp in partitions if self._topic_of[tp.topic] in READ_RECENT]
        consumer.seek_to_beginning(*[tp for tp in partitions if tp not in recent])
        offsets = consumer.offsets_for_times({tp: since_ms for tp in recent}) if recent else {}
        for tp in recent:
            found_offset = offsets.get(tp)
            if found_offset is None:
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, found_offset.offset)
        ends = {tp: offset for tp, offset in consumer.end_offsets(partitions).items()}
        return consumer, ends

    def run(self) -> None:
        try:
            consumer, ends = self._consumer()
        except BaseException as error:  # the web side shows it; the process stays up to say so
            self.error = error
            log.error("console.feed_failed", error=str(error))
            self.ready.set()
            return
        self.ready.set()
        caught_up = False
        try:
            while not self.stopping.is_set():
                polled = consumer.poll(timeout_ms=self.poll_ms)
                batch: Batch = []
                for tp, records in polled.items():
                    for record in records:
                        event = self._decode(tp.topic, record.value)
                        if event is not None:
                            batch.append(event)
                if batch:
                    self.deliver(batch)
                if not caught_up and all(consumer.position(tp) >= end for tp, end in ends.items()):
                    caught_up = True
                    CAUGHT_UP.set(1)
                    self.on_caught_up()
        except BaseException as error:
            self.error = error
            log.error("console.feed_failed", error=str(error))
        finally:
            consumer.close()

    def _decode(self, broker_topic: str, value: bytes | None) -> models.Event | None:
        topic = self._topic_of.get(broker_topic, broker_topic)
        RECORDS.labels(topic).inc()
        try:
            event = codec.decode(value or b"")
        except codec.InvalidEventError as error:
            SKIPPED.labels(topic).inc()
            log.warning("console.record_skipped", topic=topic, reason=str(error)[:200])
            return None
        if event.topic != topic:
            SKIPPED.labels(topic).inc()
            log.warning("console.record_skipped", topic=topic, reason=f"a {event.event_type} event travels on {event.topic}")
            return None
        return event


class ActionWriter:
    """Publishes alert actions, acknowledged by every in-sync replica before ``publish`` returns."""

    def __init__(self, settings: Settings) -> None:
        self.topic = settings.topic(topics.ALERT_ACTIONS)
        self._producer: KafkaProducer | None = None
        self._settings = settings
        self._lock = threading.Lock()

    def _get(self) -> KafkaProducer:
        with self._lock:
            if self._producer is None:
                self._producer = KafkaProducer(
                    **self._settings.kafka_client(), **UNMETERED, acks="all", enable_idempotence=True, linger_ms=0, max_block_ms=10_000
                )
            return self._producer

    def publish(self, event: models.AlertAction, timeout: float = 10.0) -> None:
        self._get().send(self.topic, key=event.data.table_id.encode(), value=codec.encode(event)).get(timeout=timeout)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(timeout=5)


def make_action(data: models.AlertActionData, *, id: str, source: str, now: datetime | None = None) -> models.AlertAction:
    return codec.make(models.AlertAction, data, id=id, source=source, time=now or datetime.now(UTC))
