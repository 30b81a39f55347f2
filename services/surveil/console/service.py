"""``surveil serve console`` (or ``surveil console``): the console as a service.

The web app runs in uvicorn; the Kafka feed in a thread of its own, handing each poll's events to
the event loop (``loop.call_soon_threadsafe``), so the board is only ever touched on the loop's
thread. Prometheus metrics on ``METRICS_PORT`` (9106), as every service; the web port
(``CONSOLE_PORT``, 8088) serves nothing to anyone not logged in.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import uvicorn
from starlette.applications import Starlette

from ..analysis.export import Manifest, export_log
from ..events.models import Event
from ..runtime import logs, metrics
from ..runtime.config import Settings
from .app import Console, create_app
from .config import ConfigError, ConsoleConfig
from .feed import ActionWriter, Feed
from .users import UserStore

SERVICE = "console"


def build(settings: Settings, config: ConsoleConfig) -> tuple[Starlette, Console]:
    """The app and its console, the feed started with the app and stopped with it."""
    writer = ActionWriter(settings)

    def exporter(start: datetime, end: datetime, tables: list[str], out: Path) -> Manifest:
        return export_log(settings, start, end, tables, out)

    console = Console(config, UserStore(config.users_file), writer, source=f"surveil-console/{settings.instance_id}", exporter=exporter)
    app = create_app(console)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()

        def deliver(batch: list[Event]) -> None:
            loop.call_soon_threadsafe(console.deliver, batch)

        def caught_up() -> None:
            loop.call_soon_threadsafe(console.mark_caught_up)

        feed = Feed(
            settings,
            deliver=deliver,
            caught_up=caught_up,
            history_hours=config.history_hours,
        )
        feed.start()

        async def watch() -> None:  # the feed's failure shows on every page
            while feed.is_alive():
                await asyncio.sleep(1)
            if feed.error is not None:
                console.feed_error = str(feed.error) or type(feed.error).__name__

        watcher = asyncio.create_task(watch())
        try:
            yield
        finally:
            feed.stop()
            watcher.cancel()
            await asyncio.to_thread(feed.join, 5)
            writer.close()

    app.router.lifespan_context = lifespan
    return app, console


def main() -> None:
    settings = Settings.from_env(SERVICE)
    log = logs.configure(SERVICE, settings.log_level)
    try:
        config = ConsoleConfig.from_env()
    except ConfigError as error:
        log.error("console.config", error=str(error))
        print(f"surveil console: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    users = UserStore(config.users_file).users()
    if not users:
        log.warning("console.no_users", users_file=str(config.users_file), hint="surveil console users add NAME --role supervisor")
    metrics.serve(settings.metrics_port)
    app, _ = build(settings, config)
    log.info(
        "console.start",
        url=f"http://{config.host}:{config.port}/",
        kafka=settings.kafka_bootstrap,
        principal=settings.kafka_username or None,
        users=len(users),
        metrics_port=settings.metrics_port,
    )
    uvicorn.run(app, host=config.host, port=config.port, log_level="warning", access_log=False, proxy_headers=False)
