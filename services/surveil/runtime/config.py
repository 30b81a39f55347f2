"""Configuration from environment variables, with defaults that work against `ops/stack.sh up`.

How a Kafka client proves who it is lives here and nowhere else: the ``kafka_*`` security fields
of ``Settings`` (``KAFKA_SECURITY_PROTOCOL``, ``KAFKA_SASL_MECHANISM``, ``KAFKA_USERNAME``,
``KAFKA_PASSWORD``, ``KAFKA_SSL_CAFILE``), turned into kafka-python's keyword arguments by
``Settings.kafka_client`` and into faust's (aiokafka's) credentials by
``Settings.faust_credentials``. Every client of the code base is made through one of the two.
Redis credentials travel in ``REDIS_URL`` (``redis://user:password@host:port/db``). A password
may come from a file instead (a Docker secret): ``KAFKA_PASSWORD_FILE``, and
``REDIS_PASSWORD_FILE`` with the user in ``REDIS_URL`` (``redis://settlement@redis:6379/0``).
docs/security.md says which principal may do what.
"""

from __future__ import annotations

import os
import socket
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

# Each service's /metrics port when METRICS_PORT is not set (ops/prometheus scrapes these).
DEFAULT_METRICS_PORTS = {
    "shoe-reader": 9101,
    "table-controller": 9102,
    "settlement": 9103,
    "anomaly-detection": 9104,
    "lag-exporter": 9105,
    "console": 9106,
}


# kafka-python's own metrics: sensors it updates at every turn of its I/O loop and for every
# request and record. Nothing here reads them (the services export their own), and they cost a
# long-running client 10 - 20 % of its CPU (docs/performance.md).
UNMETERED: dict[str, Any] = {"metrics_enabled": False}


@dataclass(frozen=True, slots=True)
class Settings:
    service: str
    kafka_bootstrap: str
    redis_url: str = field(repr=False)  # it may carry a password: redis_url_redacted for logs
    metrics_port: int
    instance_id: str
    log_level: str
    partitions: int
    # Name prefixes that keep one deployment apart from another on a shared broker and Redis
    # (the integration tests run each service under their own): TOPIC_PREFIX goes before every
    # topic, the consumer group and the transactional id; REDIS_PREFIX before every Redis key.
    topic_prefix: str = ""
    redis_prefix: str = ""
    # How Kafka clients authenticate (docs/security.md). Without KAFKA_SECURITY_PROTOCOL: SASL
    # (over plaintext) when a user name is given, no authentication at all when none is.
    kafka_security_protocol: str = "PLAINTEXT"  # PLAINTEXT, SASL_PLAINTEXT, SASL_SSL or SSL
    kafka_sasl_mechanism: str = "SCRAM-SHA-256"
    kafka_username: str = ""
    kafka_password: str = field(default="", repr=False)
    kafka_ssl_cafile: str = ""  # the CA that signed the broker's certificate; empty: the system's
    # How long a producer outside a transaction (the shoe-reader's, the simulator's) waits for more
    # records before it sends a request: latency added to each card read, traded for fewer requests.
    # A transaction's commit sends at once, whatever the linger.
    kafka_linger_ms: int = 5
    # How long a transactional service (the table-controller, settlement) lets its next batch gather
    # at the broker while records keep coming (``kafka.gather_fetches``; after a fetch that came back
    # empty, the next is answered at its first record): latency added to each hop through it, traded
    # for fewer transactions (each costs the client and the broker the same however few records it
    # carries). 0: each fetch answered at its first record.
    kafka_gather_ms: int = 20
    # How often the detectors (anomaly-detection) commit their offsets, and with them write every
    # table value their events changed: the longer, the fewer values written (a busy table's value
    # is written once a commit however many events changed it), traded for what a crash makes them
    # read and publish again (the events since the last commit; consumers drop an alert they have).
    commit_interval_ms: int = 1000
    # How long a fetch of the detectors waits at the broker for more records while records keep
    # coming (one that came back empty waits for the first as before): latency added to each event
    # on its way into the detectors, traded for fewer fetches (each costs the worker and the broker
    # the same however few records it brings). 0: each fetch answered at its first record.
    fetch_gather_ms: int = 10

    def topic(self, name: str) -> str:
        """The name ``name`` has on the broker in this deployment."""
        return self.topic_prefix + name

    def kafka_client(self) -> dict[str, Any]:
        """kafka-python's keyword arguments for reaching the broker as this deployment's
        principal: ``KafkaProducer(**settings.kafka_client(), acks="all")``."""
        protocol = self.kafka_security_protocol
        config: dict[str, Any] = {"bootstrap_servers": self.kafka_bootstrap, "security_protocol": protocol}
        if protocol.startswith("SASL_"):
            if not self.kafka_username:
                raise ValueError(f"KAFKA_SECURITY_PROTOCOL={protocol} needs KAFKA_USERNAME and KAFKA_PASSWORD")
            config |= {
                "sasl_mechanism": self.kafka_sasl_mechanism,
                "sasl_plain_username": self.kafka_username,
                "sasl_plain_password": self.kafka_password,
            }
        if protocol.endswith("SSL"):
            config |= {"ssl_check_hostname": True, "ssl_cafile": self.kafka_ssl_cafile or None}
        return config

    def faust_credentials(self) -> Any:
        """The same for faust (aiokafka): ``faust.App(..., broker_credentials=...)``; None when
        the broker asks for no authentication."""
        import faust

        protocol = self.kafka_security_protocol
        context = ssl.create_default_context(cafile=self.kafka_ssl_cafile or None) if protocol.endswith("SSL") else None
        if protocol.startswith("SASL_"):
            if not self.kafka_username:
                raise ValueError(f"KAFKA_SECURITY_PROTOCOL={protocol} needs KAFKA_USERNAME and KAFKA_PASSWORD")
            return faust.SASLCredentials(
                username=self.kafka_username, password=self.kafka_password, mechanism=self.kafka_sasl_mechanism, ssl_context=context
            )
        return None if context is None else faust.SSLCredentials(context)

    @property
    def redis_url_redacted(self) -> str:
        """``redis_url`` fit for a log line: the password replaced by ``***``."""
        return redacted(self.redis_url)

    @classmethod
    def from_env(cls, service: str) -> Settings:
        env = os.environ
        return cls(
            service=service,
            kafka_bootstrap=env.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"),
            redis_url=with_password(env.get("REDIS_URL", "redis://127.0.0.1:6379/0"), secret(None, env.get("REDIS_PASSWORD_FILE"))),
            metrics_port=int(env.get("METRICS_PORT", DEFAULT_METRICS_PORTS.get(service, 9100))),
            instance_id=env.get("INSTANCE_ID") or socket.gethostname(),
            log_level=env.get("LOG_LEVEL", "INFO"),
            partitions=int(env.get("PARTITIONS", "6")),
            topic_prefix=env.get("TOPIC_PREFIX", ""),
            redis_prefix=env.get("REDIS_PREFIX", ""),
            kafka_security_protocol=env.get("KAFKA_SECURITY_PROTOCOL") or ("SASL_PLAINTEXT" if env.get("KAFKA_USERNAME") else "PLAINTEXT"),
            kafka_sasl_mechanism=env.get("KAFKA_SASL_MECHANISM") or "SCRAM-SHA-256",
            kafka_username=env.get("KAFKA_USERNAME", ""),
            kafka_password=secret(env.get("KAFKA_PASSWORD"), env.get("KAFKA_PASSWORD_FILE")),
            kafka_ssl_cafile=env.get("KAFKA_SSL_CAFILE", ""),
            kafka_linger_ms=_milliseconds("KAFKA_LINGER_MS", env.get("KAFKA_LINGER_MS", "5")),
            kafka_gather_ms=_milliseconds("KAFKA_GATHER_MS", env.get("KAFKA_GATHER_MS", "20"), most=GATHER_MOST_MS),
            commit_interval_ms=_milliseconds("COMMIT_INTERVAL_MS", env.get("COMMIT_INTERVAL_MS", "1000"), least=1),
            fetch_gather_ms=_milliseconds("FETCH_GATHER_MS", env.get("FETCH_GATHER_MS", "10"), most=GATHER_MOST_MS),
        )


# The longest gathering a fetch may be told to wait: seconds already stall a hop whose alerts are
# due within 100 ms, and a wait past the Kafka clients' request timeout would never be answered.
GATHER_MOST_MS = 10_000


def _milliseconds(name: str, value: str, least: int = 0, most: int | None = None) -> int:
    """A setting in whole milliseconds, from ``least`` to ``most``: anything else stops the service at its start."""
    number = int(value) if value.isascii() and value.isdigit() else None
    if number is None or number < least or (most is not None and number > most):
        bounds = f"{least} or more" if most is None else f"from {least} to {most}"
        raise ValueError(f"{name} must be a whole number of milliseconds, {bounds}, not {value!r}")
    return number


def secret(value: str | None, file: str | None) -> str:
    """``value``, else the content of ``file`` (a Docker secret; its line end dropped), else ''."""
    if value:
        return value
    return Path(file).read_text(encoding="utf-8").strip() if file else ""


def with_password(url: str, password: str) -> str:
    """``url`` (``redis://user@host:port/db``) with ``password`` for its user; as it is without one."""
    if not password:
        return url
    parts = urlsplit(url)
    user = quote(parts.username or "default", safe="")
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{parts.netloc.rpartition('@')[2]}"))


def kafka_client_config(bootstrap: str | None = None) -> dict[str, Any]:
    """kafka-python's keyword arguments for a tool (topics admin, tests, benchmarks): the
    credentials from the environment, as a service reads them; ``bootstrap`` instead of
    ``KAFKA_BOOTSTRAP`` when given."""
    config = Settings.from_env("tool").kafka_client()
    if bootstrap:
        config["bootstrap_servers"] = bootstrap
    return config


def redacted(url: str) -> str:
    """A URL with its password (``scheme://user:password@host``) replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + parts.netloc.rpartition("@")[2]))
