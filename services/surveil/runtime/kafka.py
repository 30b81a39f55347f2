"""Processors on Apache Kafka (kafka-python), exactly once from input offset to ledger and outputs.

Per batch of polled records:

1. decode each record (undecodable or invalid: a dead letter); if the processor has a
   ``prefetch(events, state)`` method, let it read what the batch needs in one round trip
   (``State.prefetch``); let the processor turn each event into output events (``Rejected``:
   a dead letter);
2. commit the processor's state to Redis in one MULTI/EXEC, together with the last offset applied
   per input partition and the batch's outputs per partition (the outbox);
3. publish the outputs and the consumed offsets in one Kafka transaction;
4. poll for the next batch, which gathers at the broker for ``KAFKA_GATHER_MS`` while records
   keep coming (``gather_fetches``): a transaction costs the client and the broker about the same
   whatever it carries.

Whatever a record holds (any headers, key and value, any size up to the broker's maximum), step 1
gives its outputs or its dead letter, and an output too large for the broker is a dead letter too
(``_apply``): no record stops the runner, or leaves it retrying for ever.

A crash before 2 loses nothing: the batch is read again. A crash between 2 and 3 leaves Redis one
batch ahead of Kafka; when the partitions are next assigned, the runner sees it (the latest of the
broker's committed offset, the one its own transactions committed, and the one Redis holds as
committed: each batch's Redis commit records the offsets the transactions before it committed,
and a clean stop the last ones), publishes the outboxes in one transaction with the offsets, in
the order the batch made them (a table's outputs come from its partition of each input topic,
and their consumers need that order), and resumes after it. (A broker's group coordinator out
of step with its log, a Kafka 4.1 defect after a kill -9, may answer an older offset or none.)
Either way every input changes the state once and every output is published once, in order.
Consumers read with ``read_committed``.

Zombies: a member that stalled while its partitions went to another (or lost Kafka but not Redis)
must not apply its batch too. Its Redis commit names the progress it expects to find there; the
other member moved it, so the commit writes nothing and raises ``StaleProgress``, and the runner
stops. (Its Kafka transaction is fenced by the group generation, and a runner whose offsets the
group refuses stops too; a restart of the same instance is fenced by the transactional id.)
"""

from __future__ import annotations

import functools
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
import structlog
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import CommitFailedError, FencedInstanceIdError, KafkaError
from kafka.partitioner.default import murmur2
from kafka.structs import OffsetAndMetadata

from ..events import codec, deadletter, topics
from ..events.models import Event
from ..events.signing import HEADER, SIGNED_TOPICS, DeviceKeys
from . import header_keys, metrics
from .config import UNMETERED, Settings
from .devices import DeviceRecords
from .processor import Processor, Rejected
from .state import STORE_UNAVAILABLE, Backend, StaleProgress, State

Output = tuple[str, bytes, bytes]  # topic, key, value
# An input partition's outbox: its place among the batch's partitions, and the outputs it made.
_outbox_encoder = msgspec.msgpack.Encoder()
_outbox_decoder = msgspec.msgpack.Decoder(tuple[int, list[tuple[str, bytes, bytes]]])
_outputs_decoder = msgspec.msgpack.Decoder(list[tuple[str, bytes, bytes]])  # an outbox of 0.1.0: the outputs only


def _stored_outbox(place: int, outputs: list[Output]) -> bytes:
    """An input partition's outbox as Redis keeps it: ``place``, its partition's among the batch's."""
    return _outbox_encoder.encode((place, outputs))


def _outbox(raw: bytes | None) -> tuple[int, list[Output]]:
    """A stored outbox: its place in its batch, and its outputs (one left by 0.1.0, without a
    place, goes first)."""
    if not raw:
        return 0, []
    try:
        return _outbox_decoder.decode(raw)
    except msgspec.ValidationError:
        return 0, _outputs_decoder.decode(raw)


header_keys.install()  # every record readable, whatever its header keys


def producer_config(settings: Settings) -> dict[str, Any]:
    """Durable publishing: every in-sync replica acknowledges, retries never duplicate."""
    return {
        **settings.kafka_client(),  # the broker and this principal's credentials
        **UNMETERED,
        "acks": "all",
        "enable_idempotence": True,
        "linger_ms": settings.kafka_linger_ms,
        # kafka-python wakes its sender thread for every new batch: 16 KiB batches (the default)
        # made that a wake-up every ~35 events, and cost a third of the producer's CPU.
        "batch_size": 1024 * 1024,
        "retries": 2**31 - 1,
        "delivery_timeout_ms": 120_000,
        "max_request_size": topics.MAX_RECORD_BYTES,
        "client_id": f"{settings.service}-{settings.instance_id}",
    }


@functools.lru_cache(maxsize=16384)
def partition_for(key: bytes, partitions: int) -> int:
    """The partition a keyed record goes to: kafka-python's default partitioner (murmur2, as
    Java's), which every producer of the keyed topics uses. Kept for the keys last asked (more
    than a floor's tables): murmur2 in Python takes 1.7 µs a key, and the detectors partition a
    table's key at each of its events and at each commit that writes the table."""
    return int((murmur2(key) & 0x7FFFFFFF) % partitions)


class Publisher:
    """Publishes events keyed by table id (each table's events stay in order on one partition).
    With ``keys`` (a device gateway's), events of a device topic go out signed."""

    def __init__(self, settings: Settings, keys: DeviceKeys | None = None, producer: Any = None, **overrides: Any) -> None:
        self.service = settings.service
        self.topic_prefix = settings.topic_prefix
        self.keys = keys
        # ``producer``: another client with kafka-python's ``send``, ``flush`` and ``close`` (the
        # benchmarks' simulated devices); else a KafkaProducer with ``overrides`` to its settings.
        if producer is not None and overrides:
            raise ValueError("overrides are a KafkaProducer's settings: give them to the producer passed instead")
        self.producer = producer if producer is not None else KafkaProducer(**(producer_config(settings) | overrides))

    def publish(self, event: Event) -> Any:
        """Send ``event``; returns the KafkaProducer's future of the send (done once the broker
        acknowledged it), or what another producer's ``send`` returns."""
        return self.publish_raw(event.topic, event.subject.encode(), codec.encode(event))

    def publish_raw(self, topic: str, key: bytes, value: bytes) -> Any:
        future = self.producer.send(self.topic_prefix + topic, key=key, value=value, headers=self.headers(topic, key, value))
        metrics.EVENTS_PRODUCED.labels(self.service, topic).inc()
        return future

    def headers(self, topic: str, key: bytes, value: bytes) -> list[tuple[str, bytes]]:
        """The headers of a record on ``topic`` (its contract name): with ``keys``, a device
        topic's carry the device's signature, under its next counter."""
        headers = topics.headers(topic)
        device = SIGNED_TOPICS.get(topic)
        if self.keys is not None and device is not None:
            headers.append((HEADER, self.keys.header(device(key.decode()), value)))
        return headers

    def flush(self) -> None:
        self.producer.flush()

    def close(self) -> None:
        self.producer.close()


def _source(tp: TopicPartition) -> str:
    return f"{tp.topic}:{tp.partition}"


class Unsigned(codec.InvalidEventError):
    """A device's record without its device's signature."""


def _decode(raw: bytes | None, topic: str | None = None) -> Event | codec.InvalidEventError:
    """The contract event in a record of ``topic`` (its name without the deployment's prefix), or
    why it is not one. An event of a type that travels on another topic is not one either: the
    processor would drop it unseen (or take it for what it is not), so it is a dead letter."""
    try:
        event = codec.decode(raw or b"")
    except codec.InvalidEventError as error:
        return error
    if topic is not None and event.topic != topic:
        return codec.InvalidEventError(f"a {event.event_type} event travels on {event.topic}, not on {topic}")
    return event


# The group's refusals of a transaction's offsets: the member's generation or id is no longer the group's.
GROUP_REFUSED = (CommitFailedError, FencedInstanceIdError)


class TransactionLost(KafkaError):  # type: ignore[misc]  # kafka-python is untyped
    """A transaction the producer said it committed, which the broker aborted."""


class TransactionStalled(KafkaError):  # type: ignore[misc]
    """A step of a transaction with no answer past the transaction timeout."""


# A gathering fetch is answered once its wait has passed, or once this much is waiting (a backlog):
# more than a floor's events fill in a gathering at any pace it plays.
GATHER_MIN_BYTES = 1 << 20


def gather_fetches(consumer: KafkaConsumer, gather_ms: int) -> None:
    """Makes the consumer's fetches gather while records keep coming: a fetch to a broker whose
    last answer brought records waits there up to ``gather_ms`` (or until a backlog fills it,
    ``GATHER_MIN_BYTES``); one to a broker whose last answer came back empty is answered at its
    first record, as the consumer's own settings say. Under load every fetch gathers, and a batch
    is one transaction for what ``gather_ms`` brought; an idle runner fetches no more often than
    its consumer's own wait (0.9 % of a core, against 8.1 – 8.6 % with every fetch gathering),
    and the first record after a pause is not held. Not a pause after each batch: at 1,000 tables
    an input then waited twice as long for its batch in a shoe's second ten minutes as in its
    first (docs/performance.md, "Over a shoe" and "Trades").

    kafka-python builds the fetch requests (``_create_fetch_requests``) and hands each answer to
    ``_handle_fetch_response`` on its network thread, one request in flight to a broker."""
    if gather_ms <= 0:
        return
    fetcher = consumer._fetcher
    brought: dict[int, bool] = {}  # per broker, whether its last answer brought records
    create, handle = fetcher._create_fetch_requests, fetcher._handle_fetch_response

    def created() -> dict[int, Any]:
        requests: dict[int, Any] = create()
        for node_id, (request, _) in requests.items():
            if brought.get(node_id):
                request.max_wait_ms, request.min_bytes = gather_ms, GATHER_MIN_BYTES
        return requests

    def handled(node_id: int, fetch_offsets: Any, send_time: float, response: Any) -> None:
        try:
            handle(node_id, fetch_offsets, send_time, response)
        finally:
            brought[node_id] = any(partition.records for topic in response.responses for partition in topic.partitions)

    fetcher._create_fetch_requests, fetcher._handle_fetch_response = created, handled


class KafkaRunner:
    """Runs one processor as a member of its consumer group until ``stop`` is set (or SIGTERM)."""

    def __init__(self, processor: Processor, settings: Settings, backend: Backend, keys: DeviceKeys | None = None) -> None:
        self.processor = processor
        # With keys, records of device topics must carry their device's signature, for its table, once.
        self.devices = None if keys is None else DeviceRecords(keys)
        self.settings = settings
        self.backend = backend
        self.state = State(backend, processor.name)
        self.log = structlog.get_logger().bind(service=processor.name)
        self.stop = threading.Event()
        self.topic_prefix = settings.topic_prefix
        self.unrecovered: set[TopicPartition] = set()  # assigned, paused until ``recover`` ran
        self.applied: dict[str, int | None] = {}  # per partition source: the progress Redis holds
        self._partition_counts: dict[str, int] = {}  # by topic
        self.committed: dict[TopicPartition, int] = {}  # the offsets this runner's own transactions committed
        self.unrecorded: dict[TopicPartition, int] = {}  # of those, the ones Redis does not hold yet (``_put_committed``)
        member = f"{self.topic_prefix}{processor.name}-{settings.instance_id}"
        self.consumer = KafkaConsumer(
            **settings.kafka_client(),
            **UNMETERED,
            group_id=self.topic_prefix + processor.name,
            # Static membership: a restarted instance takes its own place back at once, instead
            # of waiting out the session of the process that died (45 s by default).
            group_instance_id=member,
            client_id=f"{processor.name}-{settings.instance_id}",
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            # A batch is one Redis transaction and one Kafka transaction, whose round trips cost
            # the same for 50 records as for 5,000: a backlog goes through in few, large batches.
            max_poll_records=5000,
        )
        self.producer = KafkaProducer(
            **producer_config(settings),
            transactional_id=member,
        )
        self.producer.init_transactions()

    # ---- lifecycle --------------------------------------------------------------------------

    def stop_on_signals(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self.stop.set())

    def run(self) -> None:
        topics = [self.topic_prefix + topic for topic in self.processor.consumes]
        gather_fetches(self.consumer, self.settings.kafka_gather_ms)
        self.consumer.subscribe(topics, listener=_Recovery(self))
        self.log.info("started", topics=topics, bootstrap=self.settings.kafka_bootstrap)
        try:
            while not self.stop.is_set():
                try:
                    records = self.consumer.poll(timeout_ms=200)
                except KafkaError as error:  # the broker is away (restarting): wait for it
                    self.log.warning("poll failed; retrying", error=str(error))
                    self.stop.wait(1.0)
                    continue
                try:
                    if self.unrecovered:
                        recovered = self.recover()
                        # Paused, they return nothing; but nothing read before the seek may pass.
                        records = {tp: batch for tp, batch in records.items() if tp not in recovered}
                    if records:
                        self._process(records)
                except STORE_UNAVAILABLE as error:
                    self._wait_for_store(records, error)
            self._record_committed_at_stop()
        finally:
            self.consumer.close()
            self.producer.close(timeout=10)  # a transaction stalled mid-commit would hold it for good
            self.log.info("stopped")

    def _wait_for_store(self, batch: dict[TopicPartition, list[Any]], error: Exception) -> None:
        """Redis went away during a batch: whether or not its commit got through is unknown, so
        the batch's partitions go back to its first records and every assigned partition is
        recovered, once Redis answers, from what Redis holds, as after a restart."""
        self.log.warning("redis unavailable; the batch is tried again once it answers", error=str(error))
        self.state.discard()
        for tp, records in batch.items():
            if records and tp not in self.unrecovered:
                self.consumer.seek(tp, records[0].offset)
        assigned = self.consumer.assignment()
        self.consumer.pause(*assigned)
        self.unrecovered.update(assigned)
        self.stop.wait(1.0)

    # ---- one batch --------------------------------------------------------------------------

    def _process(self, batch: dict[TopicPartition, list[Any]]) -> None:
        started = time.perf_counter()
        outbox, offsets = self._apply(batch)
        applied = time.perf_counter()
        progress = {_source(tp): offset for tp, offset in offsets.items()}
        recording = self._put_committed()
        try:
            self.state.commit(
                progress=progress,
                outbox={source: _stored_outbox(place, outputs) for place, (source, outputs) in enumerate(outbox.items())},
                expected={source: self.applied.get(source) for source in progress},
            )
        except StaleProgress:
            # Another member applied these partitions while this one stalled (a zombie): stop
            # here; a restart rejoins the group and recovers from what Redis holds.
            self.log.error("partitions taken over by another instance; stopping", partitions=sorted(progress))
            raise
        self._forget_recorded(recording)
        self.applied.update(progress)
        committed = time.perf_counter()
        self._publish([o for outputs in outbox.values() for o in outputs], offsets)
        published = time.perf_counter()
        metrics.BATCH_SECONDS.labels(self.processor.name).observe(published - started)
        for phase, seconds in (("apply", applied - started), ("state_commit", committed - applied), ("transaction", published - committed)):
            metrics.BATCH_PHASE_SECONDS.labels(self.processor.name, phase).observe(seconds)

    def _apply(self, batch: dict[TopicPartition, list[Any]]) -> tuple[dict[str, list[Output]], dict[TopicPartition, int]]:
        """Each record of the batch verified, decoded and processed, in order, into the state:
        the outputs per partition, and the last offset per partition. A record, whatever its
        headers, key, value and size, gives its outputs or its dead letter, never an exception
        (but Redis away: the batch is tried again), so no record can stop the runner."""
        taken = time.time()
        if self.devices is not None:
            self.devices.prefetch(((self._topic(tp), record) for tp, records in batch.items() for record in records), self.state)
        decoded = {tp: [self._checked(tp, record) for record in records] for tp, records in batch.items()}
        self._time_intake(batch, decoded, taken)
        prefetch = getattr(self.processor, "prefetch", None)
        if prefetch is not None:
            try:
                prefetch([event for events in decoded.values() for event in events if isinstance(event, Event)], self.state)
            except STORE_UNAVAILABLE:
                raise
            except Exception:  # only a round trip saved: each event reads what it needs
                self.log.exception("prefetch failed; the batch reads its state event by event")
        outbox: dict[str, list[Output]] = {}
        offsets: dict[TopicPartition, int] = {}
        for tp, records in batch.items():
            outputs = outbox.setdefault(_source(tp), [])
            for record, event in zip(records, decoded[tp]):
                outputs.extend(self._handle(tp, record, event))
                offsets[tp] = record.offset
            metrics.EVENTS_CONSUMED.labels(self.processor.name, tp.topic).inc(len(records))
        return outbox, offsets

    def _time_intake(
        self, batch: dict[TopicPartition, list[Any]], decoded: dict[TopicPartition, list[Event | Exception]], taken: float
    ) -> None:
        """How long each record of the batch waited before the batch took it up (at ``taken``):
        since its event's time at the table, and since its publisher's send."""
        for tp, records in batch.items():
            topic = self._topic(tp)
            since_event = metrics.INTAKE_LATENCY.labels(self.processor.name, topic)
            since_sent = metrics.INTAKE_QUEUE_LATENCY.labels(self.processor.name, topic)
            for record, event in zip(records, decoded[tp]):
                since_sent.observe(max(taken - record.timestamp / 1000, 0.0))
                if isinstance(event, Event):
                    since_event.observe(max(taken - event.time.timestamp(), 0.0))

    def _checked(self, tp: TopicPartition, record: Any) -> Event | Exception:
        """``_verified``, or what it raised (a dead letter), but Redis away."""
        try:
            return self._verified(tp, record)
        except STORE_UNAVAILABLE:
            raise
        except Exception as error:
            return error

    def _topic(self, tp: TopicPartition) -> str:
        return str(tp.topic).removeprefix(self.topic_prefix)

    def _verified(self, tp: TopicPartition, record: Any) -> Event | codec.InvalidEventError:
        event = _decode(record.value, self._topic(tp))
        refusal = None if self.devices is None else self.devices.refusal(self._topic(tp), record, event, self.state)
        return event if refusal is None else Unsigned(refusal)

    def _handle(self, tp: TopicPartition, record: Any, event: Event | Exception) -> list[Output]:
        try:
            if isinstance(event, Exception):
                raise event
            outputs = self.processor.process(event, self.state)
            return [self._fitting(tp, record, self.topic_prefix + e.topic, e.subject.encode(), codec.encode(e)) for e in outputs]
        except Unsigned as error:
            reason, kind = str(error), deadletter.SIGNATURE
        except codec.InvalidEventError as error:
            reason, kind = str(error), deadletter.INVALID
        except Rejected as error:
            reason, kind = str(error), deadletter.REJECTED
        except STORE_UNAVAILABLE:
            raise  # not the event's fault: the batch waits for Redis
        except Exception as error:  # a bug must not stop the table's other events
            self.log.exception("processing failed", topic=tp.topic, partition=tp.partition, offset=record.offset)
            reason, kind = f"internal error: {type(error).__name__}: {error}", deadletter.INTERNAL
        return [self._dead_letter(tp, record, record.key, record.value or b"", reason, kind)]

    def _fitting(self, tp: TopicPartition, record: Any, topic: str, key: bytes, value: bytes) -> Output:
        """An output, or its dead letter if it is too large for the broker: published, it would
        fail for ever (and the runner with it, its outbox already in Redis)."""
        if topics.fits(key, value):
            return topic, key, value
        reason = f"its output to {topic} is {len(key) + len(value):,} bytes, over the broker's maximum record: not published"
        self.log.error("output too large", topic=tp.topic, partition=tp.partition, offset=record.offset, output=topic, size=len(value))
        return self._dead_letter(tp, record, key, value, reason, deadletter.INTERNAL)

    def _dead_letter(self, tp: TopicPartition, record: Any, key: bytes | None, payload: bytes, reason: str, kind: str) -> Output:
        metrics.DEAD_LETTERS.labels(self.processor.name, tp.topic).inc()
        letter = deadletter.dead_letter(
            self.processor.name,
            payload,
            reason,
            origin=tp.topic,
            topic=tp.topic,
            partition=tp.partition,
            offset=record.offset,
            key=key.decode(errors="replace") if key else None,
            kind=kind,
        )
        return self.topic_prefix + topics.deadletter_topic(self.processor.name), deadletter.record_key(key), deadletter.encode(letter)

    def _publish(self, outputs: Sequence[Output], offsets: dict[TopicPartition, int]) -> None:
        """Publish ``outputs`` and commit ``offsets`` (last applied) in one transaction; retry
        until the broker takes it: the state is already in Redis, so giving up would lose events."""
        delay = 0.5
        manager = self.producer._transaction_manager  # kafka-python tells fatal errors and epochs only there
        while True:
            try:
                epoch = manager.producer_id_and_epoch
                self.producer.begin_transaction()
                sent = [
                    self.producer.send(
                        topic,
                        key=key,
                        value=value,
                        partition=self._partition(topic, key),
                        headers=topics.headers(topic.removeprefix(self.topic_prefix)),
                    )
                    for topic, key, value in outputs
                ]
                offsets_sent = manager.send_offsets_to_transaction(
                    {tp: OffsetAndMetadata(offset + 1, "", -1) for tp, offset in offsets.items()},
                    self.consumer.group_metadata(),
                )
                self._answered(offsets_sent, "offsets")
                self._answered(manager.begin_commit(), "commit")
                # kafka-python bumps the producer's epoch after a send fails (the broker killed
                # mid-transaction), which makes the broker abort the open transaction; it then
                # reports that transaction's commit as done. Its outputs were never written. (Its
                # EndTxn goes up to v3, before transactions v2: an epoch moves only in such a bump.)
                failed = sum(future.failed() for future in sent)
                if manager.producer_id_and_epoch != epoch or failed:
                    raise TransactionLost(
                        f"its commit returned, but the broker aborted it: producer epoch {epoch.epoch} "
                        f"-> {manager.producer_id_and_epoch.epoch}, {failed} of {len(sent)} sends failed"
                    )
                self.committed.update({tp: offset + 1 for tp, offset in offsets.items()})
                self.unrecorded.update({tp: offset + 1 for tp, offset in offsets.items()})
                break
            except Exception as error:
                if manager.has_fatal_error():
                    # Fenced: the broker bumped this transactional id's epoch (it aborted the
                    # transaction, e.g. after restarting in the middle of it). This producer can do
                    # nothing more; stop, and a restart recovers the batch from Redis and publishes it.
                    self.log.error("producer fenced; stopping", error=str(error))
                    raise
                if isinstance(error, TransactionStalled):
                    # The producer is mid-commit and can neither abort nor go on: stop (logged by
                    # _answered); the restart's producer fences this one, and recovers the batch.
                    raise
                if isinstance(error, GROUP_REFUSED):
                    # The group no longer counts this member (a restarted broker forgot it, or another
                    # holds its instance id): it refuses the offsets however often they are sent, and
                    # only a poll rejoins. Stop likewise; the restart rejoins and recovers the batch.
                    self.log.error("the group refused the batch's offsets; stopping", error=str(error))
                    self._abort()
                    raise
                self.log.warning("transaction failed; retrying", error=str(error), delay=delay)
                self._abort()
                if self.stop.wait(delay):
                    raise
                delay = min(delay * 2, 10.0)
        for topic, count in Counter(topic for topic, _, _ in outputs).items():
            metrics.EVENTS_PRODUCED.labels(self.processor.name, topic).inc(count)

    def _partition(self, topic: str, key: bytes) -> int:
        """``partition_for(key)`` on ``topic``, whose partition count is asked of the producer once:
        partitioning each record afresh cost a tenth of the producer's time. Partition counts are fixed
        for the life of the topics (docs/contract.md)."""
        count = self._partition_counts.get(topic)
        if count is None:
            count = self._partition_counts[topic] = len(self.producer.partitions_for(topic))
        return partition_for(key, count)

    def _answered(self, result: Any, step: str) -> None:
        """Waits for a transactional request's result, up to the producer's transaction timeout
        (past it the broker aborts a transaction it heard nothing more of); kafka-python's own
        ``send_offsets_to_transaction``, ``commit_transaction`` and ``abort_transaction`` wait for
        ever."""
        self.producer._sender.wakeup()
        bound_ms = self.producer.config["transaction_timeout_ms"]
        if not result.wait(timeout_ms=bound_ms):
            stalled = TransactionStalled(f"the transaction's {step} had no answer in {bound_ms / 1000:.0f} s")
            self.log.error("the transaction stalled; stopping", error=str(stalled))
            raise stalled

    def _abort(self) -> None:
        try:
            self._answered(self.producer._transaction_manager.begin_abort(), "abort")
        except TransactionStalled:
            raise
        except Exception as error:  # nothing to abort, or the producer must be rebuilt
            self.log.warning("abort failed", error=str(error))

    def _put_committed(self) -> dict[TopicPartition, int]:
        """The offsets this runner's transactions committed that Redis does not hold yet, put into
        the state's next commit: a runner started later knows them from Redis, whatever the group
        coordinator answers (``recover``). Returns them, for ``_forget_recorded``."""
        putting = dict(self.unrecorded)
        for tp, offset in putting.items():
            self.state.put(self._committed_key(tp), offset)
        return putting

    def _forget_recorded(self, recorded: dict[TopicPartition, int]) -> None:
        """``recorded`` is in Redis: those of ``unrecorded`` that did not move since are done."""
        for tp, offset in recorded.items():
            if self.unrecorded.get(tp) == offset:
                del self.unrecorded[tp]

    def _record_committed_at_stop(self) -> None:
        """At a clean stop, the offsets its last transactions committed into Redis, as its next
        batch would have put them."""
        if not self.unrecorded:
            return
        try:
            putting = self._put_committed()
            self.state.commit()
            self._forget_recorded(putting)
        except STORE_UNAVAILABLE as error:
            self.log.warning("redis unavailable; the last committed offsets are not recorded", error=str(error))

    def _committed_in_redis(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The committed offsets Redis holds for these partitions, as a runner recorded them."""
        partitions = list(partitions)
        stored = self.backend.read_many([self._committed_key(tp) for tp in partitions])
        return {tp: msgspec.msgpack.decode(raw, type=int) for tp, raw in zip(partitions, stored) if raw is not None}

    def _committed_key(self, tp: TopicPartition) -> str:
        return self.state.key("published", _source(tp))

    # ---- recovery ---------------------------------------------------------------------------

    def recover(self) -> set[TopicPartition]:
        """Resume each newly assigned partition after the last batch applied to Redis, first
        publishing that batch's outboxes if its Kafka transaction never committed: in one
        transaction, in the order the batch made them. Returns the partitions it recovered."""
        self.state.discard()
        progress = self.backend.progress(self.processor.name)
        recorded = self._committed_in_redis(self.unrecovered)
        unfinished: list[tuple[int, TopicPartition, int, list[Output]]] = []  # place, partition, applied, outputs
        for tp in sorted(self.unrecovered):
            applied = self.applied[_source(tp)] = progress.get(_source(tp))
            if applied is None:
                continue
            # A broker whose group coordinator fell out of step with its log (Kafka 4.1, restarted
            # after a kill -9) answered with the offset from before this runner's own last commit,
            # or with none: what its own transactions committed, the runner knows itself, and what
            # an earlier runner's did, from Redis (all but the last batch's, unless it stopped cleanly).
            committed = max(self.consumer.committed(tp) or 0, self.committed.get(tp, 0), recorded.get(tp, 0))
            if committed <= applied:
                place, outputs = _outbox(self.backend.outbox(self.processor.name, _source(tp)))
                unfinished.append((place, tp, applied, outputs))
            self.consumer.seek(tp, applied + 1)
        if unfinished:
            unfinished.sort(key=lambda outbox: outbox[0])
            self.log.info(
                "publishing the outboxes of an unfinished batch",
                partitions=[_source(tp) for _, tp, _, _ in unfinished],
                events=sum(len(outputs) for *_, outputs in unfinished),
            )
            self._publish([o for *_, outputs in unfinished for o in outputs], {tp: applied for _, tp, applied, _ in unfinished})
        self.consumer.resume(*self.unrecovered)
        recovered, self.unrecovered = self.unrecovered, set()
        return recovered


class _Recovery(ConsumerRebalanceListener):  # type: ignore[misc]  # kafka-python is untyped
    """Recovery needs blocking consumer calls (``committed``), which kafka-python refuses inside
    its rebalance callbacks; so the callback only pauses the new partitions, and the run loop
    recovers them before it takes any of their records."""

    def __init__(self, runner: KafkaRunner) -> None:
        self.runner = runner

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.runner.state.discard()
        self.runner.unrecovered.difference_update(revoked)
        for tp in revoked:
            self.runner.applied.pop(_source(tp), None)

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.runner.consumer.pause(*assigned)
        self.runner.unrecovered.update(assigned)
