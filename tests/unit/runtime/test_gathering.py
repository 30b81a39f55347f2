"""A Kafka runner's batches gather at the broker while records keep coming (``KAFKA_GATHER_MS``):
a fetch to a broker whose last answer brought records waits there up to the setting (or until a
backlog fills it), one to a broker whose last answer came back empty is answered at its first
record, so an idle runner fetches no more often than its consumer's own wait and the first record
after a pause is not held; with 0, every fetch is answered at its first record."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from support.runners import NoClient, runner_without_kafka
from surveil.runtime.kafka import GATHER_MIN_BYTES, gather_fetches
from surveil.runtime.state import MemoryBackend
from surveil.settlement.processor import SettlementProcessor

AT_ONCE = (500, 1)  # kafka-python's own (fetch_max_wait_ms, fetch_min_bytes): answered at the first byte
GATHERING = (20, GATHER_MIN_BYTES)


class Fetcher:
    """kafka-python's fetcher as far as gathering goes: the requests it builds, one a broker, with
    the consumer's settings, and the callback each answer goes to."""

    def __init__(self, brokers: tuple[int, ...] = (1,)) -> None:
        self.brokers = brokers
        self.handled: list[Any] = []

    def _create_fetch_requests(self) -> dict[int, tuple[SimpleNamespace, dict[Any, int]]]:
        return {node_id: (SimpleNamespace(max_wait_ms=AT_ONCE[0], min_bytes=AT_ONCE[1]), {}) for node_id in self.brokers}

    def _handle_fetch_response(self, node_id: int, fetch_offsets: Any, send_time: float, response: Any) -> None:
        self.handled.append(response)


def response(*records: bytes | None) -> SimpleNamespace:
    """A fetch answer with a partition for each of ``records`` (b"" or None: none came on it)."""
    partitions = [SimpleNamespace(partition_index=index, records=held) for index, held in enumerate(records)]
    return SimpleNamespace(responses=[SimpleNamespace(topic="baccarat.table", partitions=partitions)])


def requests(fetcher: Fetcher) -> dict[int, tuple[int, int]]:
    """The settings of the next request to each broker."""
    return {node_id: (request.max_wait_ms, request.min_bytes) for node_id, (request, _) in fetcher._create_fetch_requests().items()}


def answer(fetcher: Fetcher, node_id: int, fetched: SimpleNamespace) -> tuple[int, int]:
    """The settings of the request to ``node_id`` after its answer ``fetched``."""
    fetcher._handle_fetch_response(node_id, {}, 0.0, fetched)
    return requests(fetcher)[node_id]


def test_a_fetch_that_brought_records_makes_the_next_gather_and_an_empty_one_makes_it_answer_at_once() -> None:
    fetcher = Fetcher()
    gather_fetches(SimpleNamespace(_fetcher=fetcher), 20)
    assert requests(fetcher) == {1: AT_ONCE}  # the first, as the consumer's own settings say
    answers = [response(b"records"), response(b"", b"records"), response(), response(b"", None), response(b"records")]
    assert [answer(fetcher, 1, fetched) for fetched in answers] == [GATHERING, GATHERING, AT_ONCE, AT_ONCE, GATHERING]
    assert fetcher.handled == answers  # each answer still handled as kafka-python handles it


def test_each_broker_gathers_by_its_own_last_answer() -> None:
    fetcher = Fetcher(brokers=(1, 2))
    gather_fetches(SimpleNamespace(_fetcher=fetcher), 20)
    fetcher._handle_fetch_response(1, {}, 0.0, response(b"records"))
    fetcher._handle_fetch_response(2, {}, 0.0, response(b""))
    assert requests(fetcher) == {1: GATHERING, 2: AT_ONCE}


def test_an_answer_kafka_python_fails_on_still_sets_the_next_fetch() -> None:
    fetcher = Fetcher()

    def failing(*args: Any) -> None:
        raise ValueError("a response kafka-python could not handle")

    fetcher._handle_fetch_response = failing  # type: ignore[method-assign]
    gather_fetches(SimpleNamespace(_fetcher=fetcher), 20)
    with pytest.raises(ValueError, match="could not handle"):
        fetcher._handle_fetch_response(1, {}, 0.0, response(b"records"))
    assert requests(fetcher) == {1: GATHERING}


def test_no_gathering_leaves_every_fetch_answered_at_once() -> None:
    fetcher = Fetcher()
    gather_fetches(SimpleNamespace(_fetcher=fetcher), 0)
    assert [answer(fetcher, 1, fetched) for fetched in (response(b"records"), response(b"records"))] == [AT_ONCE, AT_ONCE]


class _Consumer(NoClient):
    built: list[_Consumer] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.settings = kwargs
        self._fetcher = Fetcher()
        self.built.append(self)

    def subscribe(self, topics: Any, listener: Any) -> None:
        pass

    def close(self, **kwargs: Any) -> None:
        pass


@pytest.mark.parametrize(("gather_ms", "after_records"), [(20, GATHERING), (0, AT_ONCE)])
def test_a_runners_consumer_is_built_answering_at_once_and_gathers_by_the_setting_as_it_runs(
    gather_ms: int, after_records: tuple[int, int]
) -> None:
    _Consumer.built.clear()
    runner = runner_without_kafka(SettlementProcessor(), MemoryBackend(), client=_Consumer, gather_ms=gather_ms)
    consumer = next(built for built in _Consumer.built if "group_id" in built.settings)
    assert not {"fetch_max_wait_ms", "fetch_min_bytes"} & consumer.settings.keys()
    runner.stop.set()
    runner.run()  # subscribes, stops at once
    assert answer(consumer._fetcher, 1, response(b"records")) == after_records
    assert answer(consumer._fetcher, 1, response()) == AT_ONCE
