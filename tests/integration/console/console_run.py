"""The console as a process of a test's deployment (its topics, its principal's ACLs), and the
headless Chromium that opens it: Playwright for Python driving Debian's ``chromium``
(``/usr/bin/chromium``, installed by ops/install.sh; Playwright's own browsers are never fetched).

Also used by bench/console.py and to take the screenshots in docs/img/.
"""

from __future__ import annotations

import os
import secrets
import time
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka import KafkaProducer

from support.processes import Launched, answering, free_port, stop
from surveil.console.users import UserStore
from surveil.events import codec
from surveil.events import models as m

ROOT = Path(__file__).resolve().parents[3]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
USERS = {"sam": ("supervisor", "supervisor-pass-1"), "olivia": ("operator", "operator-pass-1"), "audrey": ("auditor", "auditor-pass-1")}


@dataclass
class ConsoleProcess:
    """``surveil serve console`` on free ports, its users in ``folder``."""

    env: dict[str, str]
    folder: Path
    port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    token: str = field(default_factory=lambda: secrets.token_hex(24))
    process: Launched | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, history_hours: float = 12) -> None:
        users = UserStore(self.folder / "users.json")
        if not users.users():
            for name, (role, password) in USERS.items():
                users.add(name, role, password)
        env = {
            **self.env,
            "CONSOLE_PORT": str(self.port),
            "METRICS_PORT": str(self.metrics_port),
            "CONSOLE_USERS_FILE": str(self.folder / "users.json"),
            "CONSOLE_EXPORT_DIR": str(self.folder / "exports"),
            "CONSOLE_SECRET_KEY": self.env.get("CONSOLE_SECRET_KEY") or secrets.token_hex(32),
            "ALERTMANAGER_WEBHOOK_TOKEN": self.token,
            "CONSOLE_HISTORY_HOURS": str(history_hours),
        }
        self.env["CONSOLE_SECRET_KEY"] = env["CONSOLE_SECRET_KEY"]
        self.process = Launched.serve("console", env, self.folder / "console.log", append=True)
        self.process.wait_ready(answering(self.url + "/login"), "the console", f"does not answer on {self.url}", pause=0.2, logs=self.log)

    def wait_caught_up(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2).read().decode()
            if "surveil_console_caught_up 1.0" in metrics:
                return
            time.sleep(0.2)
        raise TimeoutError(f"the console did not catch up:\n{self.log()}")

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)

    def log(self, chars: int = 4000) -> str:
        path = self.folder / "console.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def publish(client: Mapping[str, Any], prefix: str, events: Iterable[m.Event]) -> None:
    """Each event to its topic (the deployment's), keyed by table, acknowledged by the broker; the
    record stamped with the event's time, as a live producer's are (it sends as things happen)."""
    producer = KafkaProducer(**client, acks="all", linger_ms=0)
    try:
        for event in events:
            stamp = int(event.time.timestamp() * 1000)
            producer.send(prefix + event.topic, key=event.data.table_id.encode(), value=codec.encode(event), timestamp_ms=stamp)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=5)


@contextmanager
def chromium(width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A Playwright browser context on Debian's chromium, headless."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": width, "height": height})
            yield context
            context.close()
        finally:
            browser.close()


def log_in(page: Any, url: str, name: str) -> None:
    page.goto(url + "/login")
    page.fill("#name", name)
    page.fill("#password", USERS[name][1])
    page.click("#login button[type=submit]")
    page.wait_for_url(url + "/")


def consumer_env(base: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {**base, "TOPIC_PREFIX": prefix, "LOG_LEVEL": "INFO", "INSTANCE_ID": f"it-{os.getpid()}"}
