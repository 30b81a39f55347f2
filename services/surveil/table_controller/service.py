"""The table-controller service: the processor on the Kafka runner, its per-table state in Redis."""

from __future__ import annotations

import redis

from ..runtime import logs, metrics
from ..runtime.config import Settings
from ..runtime.devices import keys_from_env
from ..runtime.kafka import KafkaRunner
from ..runtime.state import RedisBackend
from .processor import TableController


def main() -> None:
    settings = Settings.from_env(TableController.name)
    logs.configure(settings.service, settings.log_level)
    metrics.serve(settings.metrics_port)
    backend = RedisBackend(redis.Redis.from_url(settings.redis_url), settings.redis_prefix)
    keys = keys_from_env(settings.service, kinds=("console",))  # its consoles' and bet sensors' keys only
    runner = KafkaRunner(TableController(), settings, backend, keys)
    runner.stop_on_signals()
    runner.run()
