"""The whole pipeline of the test's own (its topics and Redis keys) on the session's broker and
Redis: the table side's deployment with settlement and anomaly-detection added."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "table_side"))
from table_side_deployment import TableSide, free_port  # noqa: E402

from surveil.runtime.access import PrefixAccess  # noqa: E402

SERVICES = ("shoe-reader", "table-controller", "settlement", "anomaly-detection")


@dataclass
class Pipeline(TableSide):
    metrics_ports: dict[str, int] = field(default_factory=lambda: {name: free_port() for name in SERVICES})
    starts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SERVICES, 0))

    def start_all(self) -> None:
        for service in SERVICES:
            self.start(service)


@pytest.fixture
def pipeline(
    kafka_bootstrap: str, redis_url: str, unique_topics: dict[str, str], topic_prefix: str,
    redis_prefix: str, redis_client: redis.Redis, tmp_path: Path, prefix_access: PrefixAccess,
) -> Iterator[Pipeline]:
    # Each service (and the simulator) as its own principal, with the ACLs of the test's prefix.
    deployment = Pipeline(kafka_bootstrap, redis_url, topic_prefix, redis_prefix, tmp_path, prefix_access)
    try:
        yield deployment
    finally:
        deployment.stop_all()
