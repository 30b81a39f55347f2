"""A console without Kafka: its app over a board fed by the test, and a writer that hands each
action straight back to it as if read from ``baccarat.alert-actions``."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pytest
from starlette.testclient import TestClient

from support.scenario import BetSpec, Scenario, lines
from surveil.analysis.replay import replay
from surveil.console.app import Console, create_app
from surveil.console.config import ConsoleConfig
from surveil.console.users import UserStore
from surveil.core.money import Spot
from surveil.events import codec
from surveil.events import models as m

PASSWORDS = {"olivia": "operator-pass-1", "sam": "supervisor-pass-1", "audrey": "auditor-pass-1"}
ROLES = {"olivia": "operator", "sam": "supervisor", "audrey": "auditor"}
WEBHOOK_TOKEN = "t" * 40


@dataclass
class Loopback:
    """The topic, in short: what the console publishes comes back to it, in order."""

    console: Console | None = None
    published: list[m.AlertAction] = field(default_factory=list)

    def publish(self, event: m.AlertAction, timeout: float = 10.0) -> None:
        self.published.append(event)
        assert self.console is not None and self.console.loop is not None
        self.console.loop.call_soon_threadsafe(self.console.deliver, [event])


@dataclass
class Room:
    console: Console
    writer: Loopback
    alerts: list[m.AlertRaised]
    events: list[m.Event]

    def client(self) -> TestClient:
        return TestClient(create_app(self.console), follow_redirects=False)

    def login(self, client: TestClient, name: str) -> str:
        """Log ``name`` in; the session's CSRF token."""
        page = client.get("/login")
        token = csrf_of(page.text)
        response = client.post("/login", data={"name": name, "password": PASSWORDS[name], "csrf_token": token})
        assert response.status_code == 303, response.text
        return csrf_of(client.get("/").text)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "no CSRF token in the page"
    return found.group(1)


def floor_events() -> tuple[list[m.Event], list[m.AlertRaised]]:
    """Two tables' shoes: at T01 a Banker win paid without its commission (its round's totals
    kept consistent) and a result declared against the cards, at T02 a hand showing another card
    than the shoe read."""

    def uncommissioned(event: m.Event) -> m.Event:
        if isinstance(event, m.BetSettled) and event.data.commission:
            fee = event.data.commission
            return msgspec.structs.replace(event, data=msgspec.structs.replace(event.data, net=event.data.net + fee, commission=0))
        if isinstance(event, m.RoundSettled) and event.data.commission:
            d, fee = event.data, event.data.commission
            changed = msgspec.structs.replace(d, paid_out=d.paid_out + fee, commission=0, house_net=d.house_net - fee)
            return msgspec.structs.replace(event, data=changed)
        return event

    def switch(player: list[m.HandCard], banker: list[m.HandCard]) -> None:
        player[0] = m.HandCard(index=player[0].index, card="2S")

    events: list[m.Event] = []
    for table, options in (("T01", {"declare": {"outcome": "banker"}}), ("T02", {"bend": switch})):
        s = Scenario(table=table)
        s.start_shoe()
        s.round(["2H", "8C", "3D", "KS"], [BetSpec("P1", Spot.BANKER, 1000)])
        s.round(["2H", "3C", "3D", "KS", "4H", "5C"], [BetSpec("P2", Spot.PLAYER, 2000, seat="2")], **options)
        s.end_shoe()
        events += [uncommissioned(e) for e in s.log()] if table == "T01" else s.log()
    events.sort(key=lambda e: e.time)
    result = replay(iter(lines(events)))
    return [codec.decode(line) for line in lines(events)], result.alerts  # as the feed reads them


@pytest.fixture(scope="session")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three users, hashed once (argon2 takes its time, on purpose)."""
    path = tmp_path_factory.mktemp("console") / "users.json"
    store = UserStore(path)
    for name, password in PASSWORDS.items():
        store.add(name, ROLES[name], password)
    return path


@pytest.fixture
def room(tmp_path: Path, users_file: Path) -> Iterator[Room]:
    shutil.copy(users_file, tmp_path / "users.json")
    store = UserStore(tmp_path / "users.json")
    config = ConsoleConfig(users_file=tmp_path / "users.json", secret_key="k" * 64, webhook_token=WEBHOOK_TOKEN)
    writer = Loopback()
    console = Console(config, store, writer)
    writer.console = console
    events, alerts = floor_events()
    console.deliver([*events, *alerts])
    console.mark_caught_up()
    yield Room(console, writer, alerts, events)
