"""The Kafka runner's exactly-once recovery, crash by crash: the settlement runner stops dead at
the two moments that matter (after the batch is in Redis, before its Kafka transaction; and
inside the transaction, before its commit), and a new runner with the same instance id publishes
the batch exactly once from the Redis outbox and carries on, in the order the batch made it. A
transaction the broker aborted under a commit that returned (kafka-python's epoch bump) is
published again. A zombie, whose partitions another member moved on, writes nothing. And a runner
whose batches gather at the broker (``KAFKA_GATHER_MS``) commits fewer, larger batches
to the same ledger, and idle, answers its next record at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from kafka import KafkaProducer, TopicPartition
from kafka.errors import CommitFailedError
from kafka.producer.transaction_manager import TransactionalRequestResult

from integration.deployment import (
    Deployment,
    Relay,
    assert_published_once_each,
    dump_memory,
    offline_events,
    offline_settlement,
    settlement_events,
    simulated_floor,
    table_events,
)
from surveil.events import codec, topics
from surveil.events import models as m
from surveil.runtime.config import Settings, kafka_client_config
from surveil.runtime.kafka import KafkaRunner, TransactionStalled
from surveil.runtime.state import StaleProgress
from surveil.settlement.processor import SettlementProcessor


class Crash(BaseException):
    """The process dying: nothing after it runs (the runner catches Exception, not this)."""


def runner(deployment: Deployment, processor: Any = None, gather_ms: int = 0) -> KafkaRunner:
    processor = processor or SettlementProcessor()
    settings = Settings(
        service=processor.name,
        kafka_bootstrap=deployment.bootstrap,
        redis_url=deployment.redis_url,
        metrics_port=0,
        instance_id="it-crash",
        log_level="INFO",
        partitions=6,
        topic_prefix=deployment.topic_prefix,
        redis_prefix=deployment.redis_prefix,
        kafka_gather_ms=gather_ms,
    )
    return KafkaRunner(processor, deployment.as_service(settings, processor.name), deployment.redis_backend())


def crash_after_redis(run: KafkaRunner) -> None:
    def die(*_: object) -> None:
        raise Crash

    run._publish = die  # type: ignore[method-assign]


def crash_before_the_kafka_commit(run: KafkaRunner) -> None:
    def die() -> None:
        raise Crash  # the outputs and offsets were sent in the open transaction

    run.producer._transaction_manager.begin_commit = die


def started(run: KafkaRunner) -> tuple[threading.Thread, list[BaseException]]:
    """``run`` running in a thread, and the list that gets what it raised."""
    failures: list[BaseException] = []

    def go() -> None:
        try:
            run.run()
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            failures.append(error)

    thread = threading.Thread(target=go)
    thread.start()
    return thread, failures


def stops_by_itself(run: KafkaRunner, within_s: float, otherwise: str) -> list[BaseException]:
    """What ``run`` raised, having stopped by itself within ``within_s`` (else the test fails, saying ``otherwise``)."""
    thread, failures = started(run)
    thread.join(within_s)
    stopped = not thread.is_alive()
    run.stop.set()
    thread.join(60)
    assert stopped, otherwise
    return failures


def settles_as_offline(deployment: Deployment, run: KafkaRunner, events: list[m.Event]) -> None:
    """``run`` until the floor is settled: the ledger is the offline run's, each settlement published once."""
    thread = threading.Thread(target=run.run)
    thread.start()
    try:
        deployment.wait_until_settled()
    finally:
        run.stop.set()
        thread.join(60)
    assert deployment.dump() == dump_memory(offline_settlement(events).ledger.backend)  # type: ignore[arg-type]
    assert_published_once_each(deployment, settlement_events(events))


@pytest.mark.parametrize("crash", [crash_after_redis, crash_before_the_kafka_commit])
def test_a_batch_cut_short_by_a_crash_is_published_once_by_the_next_runner(
    deployment: Deployment, crash: Callable[[KafkaRunner], None]
) -> None:
    events = simulated_floor(tables=2, shoes=1, seed=15)
    deployment.publish(table_events(events))

    first = runner(deployment)
    crash(first)
    with pytest.raises(Crash):
        first.run()
    applied = deployment.applied_offsets()
    assert applied, "the batch reached Redis before the crash"
    assert deployment.committed_offsets() == {}, "and Kafka never committed it"

    settles_as_offline(deployment, runner(deployment), events)


def test_a_transaction_aborted_under_a_commit_that_returned_is_published_again(deployment: Deployment) -> None:
    """kafka-python bumps its producer's epoch after a send fails (the broker killed in the middle
    of a transaction); the broker aborts the open transaction for it, and the commit that follows
    returns as if it had committed. Here the bump comes as the commit begins, as a failed send's
    would: the transaction manager's ``begin_commit``, with the bump before the sender sends the
    EndTxn."""
    events = simulated_floor(tables=2, shoes=1, seed=15)
    deployment.publish(table_events(events))
    run = runner(deployment)
    manager = run.producer._transaction_manager
    begin_commit, bumped = manager.begin_commit, []

    def begin_commit_with_a_bump_under_it() -> Any:
        if bumped:
            return begin_commit()
        run.producer.flush()  # the outputs are in the broker's log, in the open transaction
        with manager._lock:  # before the sender can send the EndTxn
            result = begin_commit()
            manager.bump_producer_id_and_epoch()
        bumped.append(True)
        return result

    manager.begin_commit = begin_commit_with_a_bump_under_it
    settles_as_offline(deployment, run, events)
    assert bumped and manager.producer_id_and_epoch.epoch == 1, "the epoch was bumped once, from 0"


def test_a_batch_the_runner_committed_is_not_published_again_when_the_broker_answers_an_older_offset(
    deployment: Deployment,
) -> None:
    """Right after a broker restart, a runner that had just committed a batch lost its place in the
    group, rejoined, and was told its partitions' committed offsets from before that commit; it
    published the batch a second time from its Redis outbox. What its own transactions committed
    the runner knows itself. Here: the first batch's commit, then the member falls out of the group
    (as its heartbeat thread does on UnknownMemberId), and the broker's first answer for each of the
    batch's partitions is its offset from before the batch."""
    events = simulated_floor(tables=2, shoes=1, seed=15)
    deployment.publish(table_events(events))
    run = runner(deployment)
    publish, committed, older = run._publish, run.consumer.committed, {}

    def publish_then_fall_out(outputs: Any, offsets: dict[TopicPartition, int]) -> None:
        first = not older
        if first:
            older.update({tp: committed(tp) for tp in offsets})
        publish(outputs, offsets)
        if first:
            run.consumer._coordinator.reset_generation()

    def older_once(tp: TopicPartition) -> int | None:
        return older.pop(tp) if tp in older else committed(tp)

    run._publish = publish_then_fall_out  # type: ignore[method-assign]
    run.consumer.committed = older_once  # type: ignore[method-assign]
    settles_as_offline(deployment, run, events)
    assert older == {}, "every partition of the first batch was recovered"


def forgetting(run: KafkaRunner) -> list[TopicPartition]:
    """``run``'s consumer told no committed offset for any partition, as by a broker whose group
    coordinator fell out of step with its log and forgot the group's offsets: the partitions it
    was asked about, as they are asked."""
    asked: list[TopicPartition] = []

    def none(tp: TopicPartition) -> None:
        asked.append(tp)

    run.consumer.committed = none  # type: ignore[method-assign]
    return asked


def recovers(run: KafkaRunner, asked: list[TopicPartition]) -> None:
    """``run`` until it recovered the partitions it was assigned and read what it was given."""
    thread, failures = started(run)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (asked and run.consumer.assignment() and not run.unrecovered):
        time.sleep(0.2)
    time.sleep(2)  # a poll or more after the recovery: anything published again is out
    run.stop.set()
    thread.join(60)
    assert failures == [] and asked, "the runner recovered its partitions"


def test_a_batch_an_earlier_runner_committed_is_not_published_again_when_the_broker_answers_no_offset(
    deployment: Deployment,
) -> None:
    """A runner started while the broker's group coordinator was out of step (its predecessor
    stopped on the group's refusal) was told no committed offset, took every partition's last
    batch for one its transactions never committed, and published them all again (seen in the
    faults test with the broker killed: a round's completion twice on the table topic). Each
    batch's Redis commit records what the transactions before it committed. Here: a first batch
    of one table's events, a second of the other's, cut short after Redis; the next runner is
    told no offset, and publishes the second batch alone, once."""
    events = simulated_floor(tables=2, shoes=1, seed=15)
    first_table, second_table = ([e for e in table_events(events) if e.subject == table] for table in ("T001", "T002"))
    deployment.publish(first_table)
    first = runner(deployment)
    publish, batches = first._publish, []

    def second_batch_dies(outputs: Any, offsets: dict[TopicPartition, int]) -> None:
        batches.append(sorted(offsets))
        if len(batches) > 1:
            raise Crash
        publish(outputs, offsets)
        deployment.publish(second_table)  # the next poll's

    first._publish = second_batch_dies  # type: ignore[method-assign]
    with pytest.raises(Crash):
        first.run()
    assert [[tp.partition for tp in batch] for batch in batches] == [[2], [5]], "a batch of each table's partition"
    second = runner(deployment)
    asked = forgetting(second)
    settles_as_offline(deployment, second, events)
    assert asked, "the next runner recovered its partitions"


def test_a_runner_that_stopped_cleanly_has_its_last_batch_recorded_for_the_next(deployment: Deployment) -> None:
    """Its last transactions' offsets no later batch records: a clean stop writes them to Redis.
    Here a runner settles the floor and stops; the next is told no committed offset, and
    publishes nothing again."""
    events = simulated_floor(tables=2, shoes=1, seed=15)
    deployment.publish(table_events(events))
    settles_as_offline(deployment, runner(deployment), events)
    second = runner(deployment)
    recovers(second, forgetting(second))
    assert_published_once_each(deployment, settlement_events(events))


def test_a_runner_whose_group_refuses_its_offsets_stops_and_the_next_publishes_the_batch_once(deployment: Deployment) -> None:
    """A broker back from a restart may have forgotten the member (IllegalGeneration, UnknownMemberId),
    or another member may hold its instance id (FencedInstanceId): the group refuses the batch's
    offsets however often the transaction is tried, and the consumer rejoins only when polled. The
    runner stops, as a fenced one does; the next rejoins and publishes the batch from Redis once.
    Here the first runner's offsets carry a generation the group never had."""
    events = simulated_floor(tables=2, shoes=1, seed=15)
    deployment.publish(table_events(events))
    first = runner(deployment)
    group_metadata = first.consumer.group_metadata
    first.consumer.group_metadata = lambda: group_metadata()._replace(generation_id=1_000)  # type: ignore[method-assign]
    failures = stops_by_itself(first, 30, "the runner kept trying a transaction the group refuses")
    assert [type(error) for error in failures] == [CommitFailedError]
    assert deployment.applied_offsets(), "the batch reached Redis"
    settles_as_offline(deployment, runner(deployment), events)


def test_a_runner_whose_transaction_is_never_answered_stops_and_the_next_publishes_the_batch_once(deployment: Deployment) -> None:
    """kafka-python waits for ever on a transactional request the broker never answers (after a
    broker's kill -9 a settlement runner stopped polling for good). The runner waits up to its
    producer's transaction timeout, then stops; the next fences its producer and publishes the
    batch from Redis once. Here the first runner's commit is never sent."""
    events = simulated_floor(tables=2, shoes=1, seed=15)
    deployment.publish(table_events(events))
    first = runner(deployment)
    first.producer.config["transaction_timeout_ms"] = 3_000  # the runner's bound (the broker's was set at init: 60 s)
    first.producer._transaction_manager.begin_commit = TransactionalRequestResult  # never enqueued, never answered
    failures = stops_by_itself(first, 60, "the runner waited on a commit no one answers")
    assert [type(error) for error in failures] == [TransactionStalled], failures
    assert "commit had no answer in 3 s" in str(failures[0])
    assert deployment.applied_offsets(), "the batch reached Redis"
    settles_as_offline(deployment, runner(deployment), events)


def test_a_runner_whose_partitions_another_instance_moved_on_stops_without_writing(deployment: Deployment) -> None:
    """A zombie: while it stalled, another member applied its partitions (here: moved their
    progress in Redis). Its next commit finds the progress moved, writes nothing, and it stops."""
    inputs = table_events(simulated_floor(tables=2, shoes=1, seed=16))
    half = len(inputs) // 2
    deployment.publish(inputs[:half])
    zombie = runner(deployment)
    thread, failures = started(zombie)
    deployment.wait_until_settled()
    moved_on = {source: offset + 1_000 for source, offset in deployment.applied_offsets().items()}
    redis.Redis.from_url(deployment.redis_url).hset(f"{deployment.redis_prefix}settlement:progress", mapping=moved_on)
    before = deployment.dump()

    deployment.publish(inputs[half:])
    thread.join(60)
    assert not thread.is_alive(), "the zombie went on"
    assert [type(error) for error in failures] == [StaleProgress]
    assert deployment.dump() == before
    assert deployment.applied_offsets() == moved_on


@pytest.mark.parametrize("first_topic", [topics.SHOE, topics.INPUTS])
def test_a_batch_from_two_topics_cut_short_by_a_crash_is_published_in_the_order_it_was_made(
    deployment: Deployment, first_topic: str
) -> None:
    """One table's shoe events and inputs (its partition of each topic) in one batch, either
    topic's first: the table-controller's outputs for a table come from both, and its consumers
    (settlement first) need them in the order it made them. The next runner publishes the crashed
    batch's outbox in that order, though it is kept per input partition."""
    shoe = offline_events({"tables": 1, "shoes": 1, "seed": 15}, topics.SHOE)[:20]
    closes = [
        codec.make(m.BetsClose, m.BetsCloseInput(table_id=e.subject), id=f"close-{n}", source="console", time=e.time)
        for n, e in enumerate(shoe)
    ]
    deployment.publish(shoe + closes)

    first = runner(deployment, Relay())
    poll, made = first.consumer.poll, []
    put_first = deployment.topic(first_topic)

    def both_topics_in_one_batch(timeout_ms: int) -> dict[Any, list[Any]]:
        """What kafka-python hands over in one poll, here gathered until both topics are in, with
        ``first_topic``'s partition first (its order between partitions is its own)."""
        gathered: dict[Any, list[Any]] = {}
        deadline = time.monotonic() + 60
        while len({tp.topic for tp in gathered}) < 2 and time.monotonic() < deadline:
            for tp, records in poll(timeout_ms=timeout_ms).items():
                gathered.setdefault(tp, []).extend(records)
            if first.unrecovered:  # assigned, paused until the runner recovers them
                break
        return dict(sorted(gathered.items(), key=lambda item: item[0].topic != put_first))

    def die(outputs: list[tuple[str, bytes, bytes]], offsets: object) -> None:
        made.extend(value for _, _, value in outputs)
        raise Crash

    first.consumer.poll = both_topics_in_one_batch  # type: ignore[method-assign]
    first._publish = die  # type: ignore[method-assign]
    with pytest.raises(Crash):
        first.run()
    made_ids = [codec.decode(value).id for value in made]
    firsts = shoe[0].id if first_topic == topics.SHOE else "close-"
    assert made_ids[0].startswith(firsts) and not made_ids[-1].startswith(firsts), "one batch took both topics, in that order"

    second = runner(deployment, Relay())
    thread = threading.Thread(target=second.run)
    thread.start()
    try:
        published = [event.id for event in deployment.read(topics.TABLE, len(shoe) + len(closes))]
    finally:
        second.stop.set()
        thread.join(60)
    assert published[: len(made_ids)] == made_ids
    assert sorted(published) == sorted(f"{event.id}/relayed" for event in shoe + closes)


def test_a_runner_that_gathers_commits_fewer_larger_batches_to_the_same_ledger_and_idle_takes_a_record_at_once(
    deployment: Deployment,
) -> None:
    events = simulated_floor(tables=1, shoes=1, seed=15)
    *streamed, last = table_events(events)
    gather_s = 1.0
    run = runner(deployment, gather_ms=int(gather_s * 1000))
    batches: list[tuple[float, int]] = []  # when each batch began, and its records
    process = run._process

    def counted(batch: dict[Any, list[Any]]) -> None:
        batches.append((time.monotonic(), sum(map(len, batch.values()))))
        process(batch)

    def send(event: Any) -> float:
        producer.send(deployment.topic(event.topic), key=event.subject.encode(), value=codec.encode(event))
        producer.flush(timeout=60)
        return time.monotonic()

    run._process = counted  # type: ignore[method-assign]
    thread = threading.Thread(target=run.run)
    thread.start()
    producer = KafkaProducer(**kafka_client_config(deployment.bootstrap), acks="all", enable_idempotence=True, linger_ms=0)
    try:
        started = time.monotonic()
        for event in streamed:  # one at a time, as a table's events come
            send(event)
            time.sleep(0.002)
        publishing = time.monotonic() - started
        deployment.wait_until_settled()
        gathered = len(batches)
        time.sleep(1.5 * gather_s)  # idle: a gathering fetch came back empty
        sent = send(last)
        deadline = sent + 30
        while len(batches) == gathered and time.monotonic() < deadline:
            time.sleep(0.01)
        deployment.wait_until_settled()
    finally:
        producer.close()
        run.stop.set()
        thread.join(60)
    assert deployment.dump() == dump_memory(offline_settlement(events).ledger.backend)  # type: ignore[arg-type]
    assert_published_once_each(deployment, settlement_events(events))
    # Each batch gathered for gather_s at the broker: no more batches than that allows in the publishing time
    # (without it, a batch of one or two records: each record was on the broker before the next was sent),
    # with a partial gathering at each end and the first fetch, answered at once.
    assert sum(records for _, records in batches[:gathered]) == len(streamed)
    assert gathered <= publishing / gather_s + 3, (gathered, publishing)
    # After an empty fetch the next is answered at its first record: the record sent when idle
    # began its batch well within a gathering.
    assert [records for _, records in batches[gathered:]] == [1]
    assert batches[gathered][0] - sent < gather_s / 4, batches[gathered][0] - sent
