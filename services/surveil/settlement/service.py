"""The settlement service: the processor on the Kafka runner, its state and ledger in Redis."""

from __future__ import annotations

import redis

from ..runtime import logs, metrics
from ..runtime.config import Settings
from ..runtime.kafka import KafkaRunner
from ..runtime.state import RedisBackend
from .processor import SettlementProcessor


def main() -> None:
    settings = Settings.from_env(SettlementProcessor.name)
    logs.configure(settings.service, settings.log_level)
    metrics.serve(settings.metrics_port)  # the settlement metrics register in the same registry
    backend = RedisBackend(redis.Redis.from_url(settings.redis_url), settings.redis_prefix)
    runner = KafkaRunner(SettlementProcessor(), settings, backend)
    runner.stop_on_signals()
    runner.run()
