"""The table-controller service: the processor on the Kafka runner, its per-table state in Redis."""

from __future__ import annotations

import redis
import structlog

from ..runtime import logs, metrics
from ..runtime.config import Settings
from ..runtime.kafka import KafkaRunner
from ..runtime.signing import DeviceKeys
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
    # Each batch costs a Redis transaction and a Kafka transaction, whatever its size: let the
    # broker gather up to 64 KiB or 100 ms of input per fetch, so a busy floor makes few, full
    # batches (a quiet one waits at most 100 ms).
    runner = KafkaRunner(TableController(), settings, backend, keys, fetch_min_bytes=64 * 1024, fetch_max_wait_ms=100)
    runner.stop_on_signals()
    runner.run()
