from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from integration.deployment import Deployment
from surveil.runtime.access import PrefixAccess


@pytest.fixture
def deployment(kafka_bootstrap: str, redis_url: str, unique_topics: dict[str, str], topic_prefix: str,
               redis_client: redis.Redis, redis_prefix: str, tmp_path: Path,
               prefix_access: PrefixAccess) -> Iterator[Deployment]:
    """The test's own topics and Redis keys (both removed afterwards); the service not started,
    and when it is, as its own principal."""
    deployment = Deployment(kafka_bootstrap, redis_url, topic_prefix, redis_prefix, tmp_path, prefix_access)
    try:
        yield deployment
    finally:
        deployment.stop_all()
