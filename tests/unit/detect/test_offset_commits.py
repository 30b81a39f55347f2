"""The detectors' consumer commits up to the first offset that is neither a processed message
nor a hole (a transaction marker, an aborted record: offsets no consumer is given) before one,
and never past a message its stream has not processed. faust took one unacked offset right after
the last commit for a marker, and acked holes when the fetcher found them: a message still in
the stream's buffer, or one faust dropped and read again later, was stepped over, and a worker
killed then never read it (tests/integration/detection: a lost round.opened, a lost card)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from aiokafka.structs import ConsumerRecord
from faust.types import TP
from faust.types.tuples import ConsumerMessage

from surveil.anomaly_detection.transport import App, Consumer

TOPIC = "baccarat.table"
PARTITION = TP(TOPIC, 0)


@pytest.fixture
def consumer() -> Iterator[Consumer]:
    loop = asyncio.new_event_loop()
    app = App("offsets", broker="kafka://127.0.0.1:1", web_enabled=False, loop=loop)  # never connects
    app.topics.acking_topics.add(TOPIC)
    consumer = app.consumer
    assert isinstance(consumer, Consumer)
    yield consumer
    loop.close()


def seek(consumer: Consumer, committed: int) -> None:
    """What ``perform_seek`` leaves: the partition read from its committed offset."""
    consumer._committed_offset[PARTITION] = committed
    consumer._read_offset[PARTITION] = committed
    consumer._sought()


def fetched(consumer: Consumer, *offsets: int) -> list[ConsumerMessage]:
    """The messages at ``offsets``, as the broker returns them and faust hands them on."""
    consumer._returned(PARTITION, list(offsets))
    return [consumer._to_message(PARTITION, ConsumerRecord(TOPIC, 0, offset, 0, 0, b"T001", b"{}", None, 4, 2, ())) for offset in offsets]


def commit(consumer: Consumer) -> int | None:
    offset = consumer._new_offset(PARTITION)
    if offset is not None:
        consumer._committed_offset[PARTITION] = offset
    return offset


def test_a_message_before_a_marker_is_not_stepped_over_while_unprocessed(consumer: Consumer) -> None:
    seek(consumer, 10)
    ten, twelve = fetched(consumer, 10, 12)  # a marker at 11
    assert commit(consumer) is None
    consumer.ack(twelve)  # (the stream processes in order; this is faust dropping 10 and reading it again)
    assert commit(consumer) is None
    consumer.ack(ten)
    assert commit(consumer) == 13


def test_a_message_dropped_after_a_commit_holds_the_next_commit(consumer: Consumer) -> None:
    seek(consumer, 0)
    messages = fetched(consumer, 0, 1, 2, 3)
    consumer.ack(messages[0])
    assert commit(consumer) == 1
    consumer.ack(messages[2])
    consumer.ack(messages[3])
    assert commit(consumer) is None  # 1 is a message, not a marker: faust committed 4 here
    consumer.ack(messages[1])
    assert commit(consumer) == 4


def test_a_message_faust_dropped_is_no_hole(consumer: Consumer) -> None:
    seek(consumer, 0)
    messages = fetched(consumer, 0, 1, 2, 3)
    for processed in (messages[0], messages[2], messages[3]):  # 1 dropped, to be read again
        consumer.ack(processed)
    assert commit(consumer) == 1
    consumer.ack(messages[1])
    assert commit(consumer) == 4


def test_markers_between_processed_messages_are_stepped_over(consumer: Consumer) -> None:
    seek(consumer, 0)
    messages = fetched(consumer, 0, 1, 3, 4, 5, 8, 9)  # markers at 2, 6 and 7
    for processed in messages[:4]:
        consumer.ack(processed)
    assert commit(consumer) == 5  # 5 fetched, not yet processed
    for processed in messages[4:]:
        consumer.ack(processed)
    assert commit(consumer) == 10


@pytest.mark.parametrize("first", [21, 23])
def test_a_partition_sought_to_a_marker_steps_over_it(consumer: Consumer, first: int) -> None:
    # A restarted worker reads from the committed offset, here a marker (and more, up to ``first``).
    seek(consumer, 20)
    (message,) = fetched(consumer, first)
    consumer.ack(message)
    assert commit(consumer) == first + 1


def test_a_partition_read_again_from_below_its_commit_commits_on_from_it(consumer: Consumer) -> None:
    # The rewind after a restart (perform_seek): the tables applied less than was committed.
    consumer._committed_offset[PARTITION] = 30
    consumer._read_offset[PARTITION] = 25
    consumer._sought()
    messages = fetched(consumer, 25, 27, 28, 29, 31, 32)  # markers at 26 and 30
    for processed in messages:
        consumer.ack(processed)
    assert commit(consumer) == 33


def test_input_partitions_resume_only_with_the_flow(consumer: Consumer, monkeypatch: pytest.MonkeyPatch) -> None:
    # faust resumes them, seeks, then clears the streams' queues: nothing may be fetched before.
    changelog, revoked = TP("table-watch-changelog", 0), TP(TOPIC, 1)
    monkeypatch.setattr(consumer, "assignment", lambda: {PARTITION, changelog})
    consumer.resume_partitions({PARTITION, revoked, changelog})
    assert consumer._get_active_partitions() == {changelog}
    consumer.resume_flow()
    assert consumer._get_active_partitions() == {changelog, PARTITION}  # not one a rebalance took meanwhile
