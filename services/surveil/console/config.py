"""The console's configuration, from environment variables (README, docs/console.md).

The Kafka side (``KAFKA_*``, ``TOPIC_PREFIX``, ``METRICS_PORT``, ``LOG_LEVEL``) is the runtime's
``Settings``, as for every service; what is the console's own is here. It fails closed: without
``CONSOLE_SECRET_KEY`` it does not start (a key made up at start would log everyone out at each
restart, and a weak one would let anyone forge a session), and without
``ALERTMANAGER_WEBHOOK_TOKEN`` it refuses Alertmanager's webhook.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import time
from pathlib import Path

from ..runtime.config import secret

MIN_SECRET_LENGTH = 32  # characters of CONSOLE_SECRET_KEY (openssl rand -hex 32 gives 64)


class ConfigError(ValueError):
    """A setting the console cannot start with; the message names the variable."""


@dataclass(frozen=True, slots=True)
class ConsoleConfig:
    host: str = "127.0.0.1"
    port: int = 8088
    users_file: Path = Path("console-users.json")
    secret_key: str = field(default="", repr=False)
    session_minutes: int = 30  # idle time after which a session ends
    secure_cookies: bool = False  # send the session cookie over HTTPS only
    webhook_token: str = field(default="", repr=False)
    history_hours: float = 12.0  # how far back the floor's topics are read on start (the alerts: all)
    shift_starts: tuple[time, ...] = (time(7), time(15), time(23))  # Macau time
    max_rows: int = 500  # alerts listed at most (open ones first: a filter finds the rest)
    export_dir: Path = Path("console-exports")  # the auditors' exports of alerts' rounds

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ConsoleConfig:
        secret_key = secret(env.get("CONSOLE_SECRET_KEY"), env.get("CONSOLE_SECRET_KEY_FILE"))
        if len(secret_key) < MIN_SECRET_LENGTH:
            raise ConfigError(
                f"CONSOLE_SECRET_KEY must be set to a random string of at least {MIN_SECRET_LENGTH} characters "
                "(it signs the session cookies): e.g. openssl rand -hex 32"
            )
        try:
            shift_starts = tuple(
                sorted(time.fromisoformat(t.strip()) for t in env.get("CONSOLE_SHIFT_STARTS", "07:00,15:00,23:00").split(","))
            )
            return cls(
                host=env.get("CONSOLE_HOST", "127.0.0.1"),
                port=int(env.get("CONSOLE_PORT", "8088")),
                users_file=Path(env.get("CONSOLE_USERS_FILE", "console-users.json")),
                secret_key=secret_key,
                session_minutes=int(env.get("CONSOLE_SESSION_MINUTES", "30")),
                secure_cookies=env.get("CONSOLE_SECURE_COOKIES", "false").lower() in ("1", "true", "yes"),
                webhook_token=secret(env.get("ALERTMANAGER_WEBHOOK_TOKEN"), env.get("ALERTMANAGER_WEBHOOK_TOKEN_FILE")),
                history_hours=float(env.get("CONSOLE_HISTORY_HOURS", "12")),
                shift_starts=shift_starts,
                max_rows=int(env.get("CONSOLE_MAX_ROWS", "500")),
                export_dir=Path(env.get("CONSOLE_EXPORT_DIR", "console-exports")),
            )
        except ValueError as error:
            raise ConfigError(f"a CONSOLE_* setting is not valid: {error}") from None
