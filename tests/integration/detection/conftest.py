"""The whole pipeline of the test's own (its topics and Redis keys) on the session's broker and
Redis: the four services of ``integration.deployment.Deployment``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from integration.deployment import Deployment
from surveil.runtime.access import PrefixAccess


@pytest.fixture
def pipeline(
    kafka_bootstrap: str, redis_url: str, unique_topics: dict[str, str], topic_prefix: str,
    redis_prefix: str, redis_client: redis.Redis, tmp_path: Path, prefix_access: PrefixAccess,
) -> Iterator[Deployment]:
    # Each service (and the simulator) as its own principal, with the ACLs of the test's prefix.
    deployment = Deployment(kafka_bootstrap, redis_url, topic_prefix, redis_prefix, tmp_path, prefix_access)
    try:
        yield deployment
    finally:
        deployment.stop_all()
