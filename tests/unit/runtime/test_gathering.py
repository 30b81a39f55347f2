"""A Kafka runner's next batch gathers at the broker (``KAFKA_GATHER_MS``): its consumer's fetches are
answered once the gathering is over, or at once for a backlog; with 0, at their first record."""

from __future__ import annotations

from typing import Any

import pytest

from support.runners import NoClient, runner_without_kafka
from surveil.runtime.kafka import GATHER_MIN_BYTES
from surveil.runtime.state import MemoryBackend
from surveil.settlement.processor import SettlementProcessor


class _Recording(NoClient):
    built: list[dict[str, Any]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.built.append(kwargs)


@pytest.mark.parametrize(("gather_ms", "fetches"), [(20, (20, GATHER_MIN_BYTES)), (0, (None, None))])
def test_the_consumers_fetches_gather_as_long_as_the_setting_says(gather_ms: int, fetches: tuple[int | None, int | None]) -> None:
    _Recording.built.clear()
    runner_without_kafka(SettlementProcessor(), MemoryBackend(), client=_Recording, gather_ms=gather_ms)
    consumer = next(kwargs for kwargs in _Recording.built if "group_id" in kwargs)
    assert (consumer.get("fetch_max_wait_ms"), consumer.get("fetch_min_bytes")) == fetches
