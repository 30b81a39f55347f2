"""Configuration from environment variables, with defaults that work against `ops/stack.sh up`."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

# Each service's /metrics port when METRICS_PORT is not set (ops/prometheus scrapes these).
DEFAULT_METRICS_PORTS = {
    "shoe-reader": 9101,
    "table-controller": 9102,
    "settlement": 9103,
    "anomaly-detection": 9104,
    "lag-exporter": 9105,
}


@dataclass(frozen=True, slots=True)
class Settings:
    service: str
    kafka_bootstrap: str
    redis_url: str
    metrics_port: int
    instance_id: str
    log_level: str
    partitions: int
    # Name prefixes that keep one deployment apart from another on a shared broker and Redis
    # (the integration tests run each service under their own): TOPIC_PREFIX goes before every
    # topic, the consumer group and the transactional id; REDIS_PREFIX before every Redis key.
    topic_prefix: str = ""
    redis_prefix: str = ""

    def topic(self, name: str) -> str:
        """The name ``name`` has on the broker in this deployment."""
        return self.topic_prefix + name

    @classmethod
    def from_env(cls, service: str) -> Settings:
        env = os.environ
        return cls(
            service=service,
            kafka_bootstrap=env.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092"),
            redis_url=env.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
            metrics_port=int(env.get("METRICS_PORT", DEFAULT_METRICS_PORTS.get(service, 9100))),
            instance_id=env.get("INSTANCE_ID") or socket.gethostname(),
            log_level=env.get("LOG_LEVEL", "INFO"),
            partitions=int(env.get("PARTITIONS", "6")),
            topic_prefix=env.get("TOPIC_PREFIX", ""),
            redis_prefix=env.get("REDIS_PREFIX", ""),
        )
