"""A table side (shoe-reader and table-controller) of the test's own on the session's broker and
Redis, stopped and cleaned up after the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from integration.deployment import Deployment
from surveil.runtime.access import PrefixAccess


@pytest.fixture
def table_side(
    kafka_bootstrap: str, redis_url: str, unique_topics: dict[str, str], topic_prefix: str,
    redis_prefix: str, redis_client: redis.Redis, tmp_path: Path, prefix_access: PrefixAccess,
) -> Iterator[Deployment]:
    side = Deployment(kafka_bootstrap, redis_url, topic_prefix, redis_prefix, tmp_path, prefix_access)
    try:
        yield side
    finally:
        side.stop_all()
