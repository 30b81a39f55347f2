"""The table-controller service: the processor on the Kafka runner, its per-table state in Redis."""

from __future__ import annotations

import redis
import structlog

from ..events.signing import DeviceKeys
from ..runtime import logs, metrics
from ..runtime.config import Settings
from ..runtime.kafka import KafkaRunner
from ..runtime.state import RedisBackend
from .processor import TableController


def main() -> None:
    settings = Settings.from_env(TableController.name)
    logs.configure(settings.service, settings.log_level)
    metrics.serve(settings.metrics_port)
    backend = RedisBackend(redis.Redis.from_url(settings.redis_url), settings.redis_prefix)
    keys = DeviceKeys.from_env()
    if keys is None:
        structlog.get_logger().warning("device signatures are not checked: DEVICE_KEY_SECRET is not set")
    runner = KafkaRunner(TableController(), settings, backend, keys)
    runner.stop_on_signals()
    runner.run()
