"""Per-test isolation on the shared broker and Redis (the session fixtures are in
tests/conftest.py): every test gets its own topics, consumer group and Redis keys, so tests
neither see each other's events nor depend on their order, and leave nothing behind.

The services a test starts run as their own principals (docs/security.md): ``service_env(name)``
is the environment of such a process, with its own Kafka credentials, the ACLs of
``surveil.runtime.access.kafka_grants`` for the test's ``topic_prefix``, and a Redis user of the
test's own whose keys are those under ``redis_prefix``; all of it removed when the test ends.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
import redis
from kafka import KafkaAdminClient

from integration.deployment import Deployment
from surveil.events.topics import ALL_TOPICS
from surveil.runtime.access import PrefixAccess
from surveil.runtime.config import kafka_client_config
from surveil.runtime.topic_admin import create_topics, delete_topics


def _test_tag(request: pytest.FixtureRequest) -> str:
    """A short, Kafka- and Redis-safe, unique tag naming the test: ``it-<test name>-<hex>``."""
    name = re.sub(r"[^A-Za-z0-9-]+", "-", request.node.name).strip("-")[:40]
    return f"it-{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def topic_prefix(request: pytest.FixtureRequest) -> str:
    """A prefix no other test uses, ending in a dot: ``it-test-x-1a2b3c4d.``."""
    return _test_tag(request) + "."


@pytest.fixture
def new_topic(kafka_bootstrap: str, topic_prefix: str, kafka_partitions: int) -> Iterator[Callable[..., str]]:
    """Factory: ``new_topic("name", partitions=None) -> "<topic_prefix>name"``, created (with the
    shared partition count unless told) and ready to use; deleted when the test ends."""
    created: list[str] = []

    def make(name: str, partitions: int | None = None) -> str:
        topic = topic_prefix + name
        create_topics(kafka_bootstrap, [topic], partitions or kafka_partitions)
        created.append(topic)
        return topic

    yield make
    if created:
        delete_topics(kafka_bootstrap, created)


@pytest.fixture
def unique_topics(new_topic: Callable[..., str]) -> dict[str, str]:
    """Fresh copies of all the system's topics for this test, by their real names:
    ``unique_topics[topics.SHOE] == "<topic_prefix>baccarat.shoe"``. Same partition count as the
    real ones; deleted after the test."""
    return {name: new_topic(name) for name in ALL_TOPICS}


@pytest.fixture
def consumer_group(request: pytest.FixtureRequest) -> str:
    """A consumer group id no other test uses (its committed offsets start empty)."""
    return _test_tag(request)


@pytest.fixture
def redis_prefix(request: pytest.FixtureRequest) -> str:
    """The key prefix this test owns in Redis: ``it-<test name>-<hex>:``."""
    return _test_tag(request) + ":"


@pytest.fixture
def redis_client(redis_url: str, redis_prefix: str) -> Iterator[redis.Redis]:
    """A ``redis.Redis`` (bytes in, bytes out) on the session's Redis, for keys under
    ``redis_prefix``.

    Isolation is by key prefix, not by database: db 0 is the only one every Redis deployment
    (and a cluster) offers, and tests that run side by side cannot clear each other's data. The
    code under test must be given ``redis_prefix`` for its keys; when the test ends every key
    under the prefix is deleted (SCAN + UNLINK), whatever else is in the database stays.
    """
    client = redis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        doomed = list(client.scan_iter(match=redis_prefix + "*", count=1000))
        for i in range(0, len(doomed), 500):
            client.unlink(*doomed[i : i + 500])
        client.close()


@pytest.fixture
def prefix_access(kafka_bootstrap: str, redis_url: str, topic_prefix: str, redis_prefix: str) -> Iterator[PrefixAccess]:
    """The principals' rights on this test's prefixes (ACLs, Redis users), made when first asked
    for (``.env``, ``.settings``) and taken away after the test."""
    access = PrefixAccess(kafka_bootstrap, redis_url, topic_prefix, redis_prefix)
    try:
        yield access
    finally:
        access.close()


@pytest.fixture
def service_env(prefix_access: PrefixAccess) -> Callable[..., dict[str, str]]:
    """``service_env("settlement", base=None) -> env``: the environment of a service process of
    this test: ``base`` (default: the session's, the operator's) with the service's own
    credentials instead of the admin's, and no other principal's password."""

    def make(service: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
        return prefix_access.env(service, base)

    return make


@pytest.fixture
def deployment(
    kafka_bootstrap: str,
    redis_url: str,
    unique_topics: dict[str, str],
    topic_prefix: str,
    redis_client: redis.Redis,
    redis_prefix: str,
    tmp_path: Path,
    prefix_access: PrefixAccess,
) -> Iterator[Deployment]:
    """The test's own deployment (``integration.deployment``): its topics and Redis keys (removed
    afterwards); no service started, and each one started as its own principal."""
    deployment = Deployment(kafka_bootstrap, redis_url, topic_prefix, redis_prefix, tmp_path, prefix_access)
    try:
        yield deployment
    finally:
        deployment.stop_all()
        # The topics the services made for themselves (faust's changelogs, its internal topics):
        # left behind, they are hundreds of partitions that each broker restart loads again.
        admin = KafkaAdminClient(**kafka_client_config(kafka_bootstrap))
        try:
            made = [name for name in admin.list_topics() if name.startswith(topic_prefix) and name not in unique_topics.values()]
        finally:
            admin.close()
        delete_topics(kafka_bootstrap, made)
