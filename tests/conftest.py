"""Session-wide test infrastructure: where the tests' Kafka broker and Redis are.

Each of ``kafka_bootstrap`` and ``redis_url`` comes from the first of:

1. the environment: ``KAFKA_BOOTSTRAP`` ("host:port"), ``REDIS_URL`` (ops/test.sh sets both);
2. a testcontainer (``KafkaContainer`` in KRaft mode, ``RedisContainer``), when a Docker engine
   answers a ping;
3. the local stack, ``ops/stack.sh up``; stopped at the end of the session only if this session
   started it.

Both are secured (docs/security.md): the session itself is the operator, with the admin's
credentials and every principal's password in its environment (``KAFKA_USERNAME``, ...,
``KAFKA_<NAME>_PASSWORD``, ``REDIS_URL`` as the Redis admin: ops/test.sh sources
.stack/secrets/stack.env, and so does this module when it starts the stack itself). Every client a
test makes takes the admin's credentials from there (``surveil.runtime.config.kafka_client_config``);
a service the tests start runs as its own principal, with the ACLs of the test's prefixes
(``service_env`` in tests/integration/conftest.py).

Nothing is started unless a test asks for it, so unit tests never wait for a broker. Tests under
``tests/integration/`` get the ``integration`` marker automatically (``-m "not integration"``
runs the rest). The per-test isolation helpers (fresh topics, consumer groups, Redis key
prefixes) are in ``tests/integration/conftest.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from surveil.events.topics import ALL_TOPICS
from surveil.runtime.topic_admin import create_topics, partitions_from_env, settle_features

ROOT = Path(__file__).resolve().parents[1]
STACK_SH = ROOT / "ops" / "stack.sh"
INTEGRATION_DIR = Path(__file__).resolve().parent / "integration"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION_DIR in item.path.resolve().parents:
            item.add_marker(pytest.mark.integration)


# --- where things run --------------------------------------------------------------------------


def docker_engine_answers() -> bool:
    """True only when a Docker engine really answers (the client alone is not enough)."""
    try:
        import docker

        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - no socket, no daemon, no permission: all mean "no"
        return False


class OpsStack:
    """ops/stack.sh, driven from the tests: brought up at most once per session."""

    def __init__(self) -> None:
        self.started_here = False
        self._up = False

    def run(self, *args: str, timeout: float = 300) -> str:
        proc = subprocess.run(["bash", str(STACK_SH), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            pytest.fail(f"ops/stack.sh {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}", pytrace=False)
        return proc.stdout

    def ensure_up(self) -> None:
        if self._up:
            return
        already = subprocess.run(["bash", str(STACK_SH), "status"], cwd=ROOT, capture_output=True).returncode == 0
        self.run("up")  # also when already up: it checks readiness, the topics and the ACLs
        self.started_here = not already
        self._up = True
        # The operator's environment, as ops/test.sh has it: the admin's credentials, every
        # principal's password (subprocesses inherit it; each service is given only its own).
        os.environ.update(self.environment())

    @staticmethod
    def environment() -> dict[str, str]:
        """.stack/secrets/stack.env, which ``ops/stack.sh up`` writes."""
        env = {}
        for line in (ROOT / ".stack" / "secrets" / "stack.env").read_text().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.partition("=")
                env[name] = value
        return env

    @staticmethod
    def kafka_pid() -> int | None:
        """The pid of the broker that ops/stack.sh runs now, or None when it runs none (judged
        from its pid file, so a recycled pid or a foreign broker does not count)."""
        try:
            pid = int((ROOT / ".stack" / "kafka" / "kafka.pid").read_text())
            os.kill(pid, 0)
            return pid if b"kafka.Kafka" in Path(f"/proc/{pid}/cmdline").read_bytes() else None
        except (OSError, ValueError):
            return None

    @staticmethod
    def kafka_port() -> int | None:
        """The port of the broker that ops/stack.sh runs now, or None when it runs none."""
        if OpsStack.kafka_pid() is None:
            return None
        try:
            for line in (ROOT / ".stack" / "kafka" / "server.properties").read_text().splitlines():
                if line.startswith("advertised.listeners="):  # CLIENT://127.0.0.1:9092,TLS://...
                    listeners = dict(item.split("://", 1) for item in line.partition("=")[2].split(","))
                    client = listeners.get("CLIENT") or listeners["PLAINTEXT"]  # PLAINTEXT: before SASL
                    return int(client.rsplit(":", 1)[1])
        except (OSError, ValueError, KeyError):
            return None
        return None


@pytest.fixture(scope="session")
def ops_stack() -> Iterator[OpsStack]:
    """The local stack's controller. Requesting it does not start anything."""
    stack = OpsStack()
    yield stack
    if stack.started_here:
        stack.run("down")


@dataclass(frozen=True)
class KafkaBroker:
    bootstrap: str  # "host:port"
    source: str  # "env", "testcontainer" or "ops-stack"
    container: Any = None  # the testcontainer, when it is one

    @property
    def ops_controlled(self) -> bool:
        """Whether this is the broker that ops/stack.sh runs, so that its kill-kafka and
        restart-kafka act on it."""
        host, _, port = self.bootstrap.rpartition(":")
        ops_port = OpsStack.kafka_port()
        return self.source != "testcontainer" and ops_port is not None and host in ("127.0.0.1", "localhost") and int(port) == ops_port

    @property
    def can_freeze(self) -> bool:
        """Whether ``frozen`` can act on it: a testcontainer, or the broker ops/stack.sh runs."""
        return self.container is not None or self.ops_controlled

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """The broker paused, every thread of it (docker pause, or SIGSTOP), then resumed."""
        if self.container is not None:
            paused = self.container.get_wrapped_container()
            pause, resume = paused.pause, paused.unpause
        else:
            pid = OpsStack.kafka_pid() if self.ops_controlled else None
            assert pid is not None, "a broker this session does not run cannot be frozen"
            pause, resume = partial(os.kill, pid, signal.SIGSTOP), partial(os.kill, pid, signal.SIGCONT)
        pause()
        try:
            yield
        finally:
            resume()


@pytest.fixture(scope="session")
def kafka_partitions() -> int:
    """The one partition count every topic shares (env PARTITIONS, else 6)."""
    return partitions_from_env()


@pytest.fixture(scope="session")
def kafka_broker(request: pytest.FixtureRequest, kafka_partitions: int) -> KafkaBroker:
    """The session's broker; see the module docstring for where it comes from."""
    if os.environ.get("KAFKA_BOOTSTRAP"):
        return KafkaBroker(os.environ["KAFKA_BOOTSTRAP"], "env")
    if docker_engine_answers():
        from testcontainers.community.kafka import KafkaContainer

        container = KafkaContainer().with_kraft()
        container.start()
        request.addfinalizer(container.stop)
        bootstrap = container.get_bootstrap_server()
        settle_features(bootstrap)  # as ops/stack.sh up does
        create_topics(bootstrap, ALL_TOPICS, kafka_partitions)
        return KafkaBroker(bootstrap, "testcontainer", container)
    stack: OpsStack = request.getfixturevalue("ops_stack")
    stack.ensure_up()
    return KafkaBroker(f"127.0.0.1:{os.environ.get('KAFKA_PORT', '9092')}", "ops-stack")


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: KafkaBroker) -> str:
    """ "host:port" of the session's Kafka broker."""
    return kafka_broker.bootstrap


@pytest.fixture(scope="session")
def redis_url(request: pytest.FixtureRequest) -> str:
    """URL of the session's Redis (``redis://host:port/0``): REDIS_URL, a testcontainer, or
    ops/stack.sh."""
    if os.environ.get("REDIS_URL"):
        return os.environ["REDIS_URL"]
    if docker_engine_answers():
        from testcontainers.community.redis import RedisContainer

        container = RedisContainer()
        container.start()
        request.addfinalizer(container.stop)
        return f"redis://{container.get_container_host_ip()}:{container.get_exposed_port(6379)}/0"
    stack: OpsStack = request.getfixturevalue("ops_stack")
    stack.ensure_up()
    return os.environ["REDIS_URL"]  # as the admin user: from .stack/secrets/stack.env
