"""Who may do what in the console: no anonymous access, each role's limits, CSRF on every form,
the session's end (docs/console.md, "Users and roles")."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.routing import Route

from conftest import PASSWORDS, Room, csrf_of
from surveil.console import app as console_app
from surveil.console.app import create_app
from surveil.events import models as m

GET_PATHS = [
    "/",
    "/floor",
    "/events",
    "/alerts/{alert}",
    "/alerts/{alert}/handling",
    "/static/console.css",
    "/static/incident.css",
    "/nope",
]
LOGIN_FORM = '<form method="post" action="/login" id="login">'


def test_an_unauthenticated_request_gets_nothing_but_the_login_page(room: Room) -> None:
    alert = room.alerts[0].data
    client = room.client()
    for path in GET_PATHS:
        response = client.get(path.format(alert=alert.alert_id))
        assert response.status_code == 401, path
        assert LOGIN_FORM in response.text, path
        for secret in (alert.alert_id, alert.summary, alert.table_id, "T02", "RESULT_MISMATCH"):
            assert secret not in response.text, (path, secret)
    token = csrf_of(client.get("/login").text)
    response = client.post(f"/alerts/{alert.alert_id}/actions", data={"action": "acknowledge", "csrf_token": token})
    assert response.status_code == 401 and LOGIN_FORM in response.text
    assert room.writer.published == []


def test_a_wrong_password_or_an_unknown_name_is_refused_alike(room: Room) -> None:
    client = room.client()
    token = csrf_of(client.get("/login").text)
    for name, password in (("sam", "not-sams-password"), ("mallory", "whatever-password")):
        response = client.post("/login", data={"name": name, "password": password, "csrf_token": token})
        assert response.status_code == 401 and "Wrong name or password." in response.text
    assert client.get("/").status_code == 401


def test_the_login_forms_token_outlives_the_pages_other_requests(room: Room) -> None:
    """A browser asks for the page's icon (and more) alongside the form: none of it makes the form stale."""
    client = room.client()
    token = csrf_of(client.get("/login").text)
    assert client.get("/favicon.ico").status_code == 401
    assert client.get("/events").status_code == 401
    response = client.post("/login", data={"name": "sam", "password": PASSWORDS["sam"], "csrf_token": token})
    assert response.status_code == 303


def test_a_login_gives_a_new_session_and_a_new_csrf_token(room: Room) -> None:
    client = room.client()
    before = csrf_of(client.get("/login").text)
    after = room.login(client, "olivia")
    assert after != before
    page = client.get("/")
    assert page.status_code == 200 and "RESULT_MISMATCH" in page.text
    response = room.client().post("/login", data={"name": "olivia", "password": PASSWORDS["olivia"], "csrf_token": before})
    assert response.status_code == 403  # a token from another session


def test_the_session_cookie_is_signed_http_only_and_same_site_strict(room: Room) -> None:
    client = room.client()
    token = csrf_of(client.get("/login").text)
    response = client.post("/login", data={"name": "sam", "password": PASSWORDS["sam"], "csrf_token": token})
    cookie = response.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    forged = room.client()
    forged.cookies.set("surveil_console", response.cookies["surveil_console"][:-4] + "AAAA")
    assert forged.get("/").status_code == 401


# ---- CSRF -----------------------------------------------------------------------------------


def test_every_form_needs_the_sessions_csrf_token(room: Room) -> None:
    alert = room.alerts[0].data
    client = room.client()
    token = room.login(client, "sam")
    url = f"/alerts/{alert.alert_id}/actions"
    assert client.post(url, data={"action": "acknowledge"}).status_code == 403
    assert client.post(url, data={"action": "acknowledge", "csrf_token": token[:-2] + "xx"}).status_code == 403
    assert client.post(url, data={"action": "acknowledge", "csrf_token": ""}).status_code == 403
    assert client.post("/logout", data={}).status_code == 403
    assert room.writer.published == []
    assert client.post(url, data={"action": "acknowledge", "csrf_token": token}).status_code == 303
    assert [e.data.action for e in room.writer.published] == ["acknowledge"]
    assert client.post(url, data={"action": "note", "note": "seen"}, headers={"X-CSRF-Token": token}).status_code == 303


def test_no_post_route_but_the_webhook_goes_without_a_csrf_token(room: Room) -> None:
    """Each POST route, logged in, refuses a form without the token (the webhook has its bearer token)."""
    client = room.client()
    room.login(client, "sam")
    posts = [r.path for r in create_app(room.console).routes if isinstance(r, Route) and "POST" in (r.methods or ())]
    assert "/api/alertmanager" in posts and len(posts) >= 4
    alert_id = room.alerts[0].data.alert_id
    for path in posts:
        if path == "/api/alertmanager":
            continue
        response = client.post(path.format(alert_id=alert_id), data={"action": "acknowledge"})
        assert response.status_code == 403, path


# ---- roles --------------------------------------------------------------------------------


def act(room: Room, user: str, action: str, **fields: str) -> int:
    client = room.client()
    token = room.login(client, user)
    alert_id = fields.pop("alert", room.alerts[0].data.alert_id)
    return client.post(f"/alerts/{alert_id}/actions", data={"action": action, "csrf_token": token, **fields}).status_code


def test_an_operator_acknowledges_and_notes_but_cannot_assign_or_close(room: Room) -> None:
    assert act(room, "olivia", "close", reason="confirmed") == 403
    assert act(room, "olivia", "assign", assignee="olivia") == 403
    assert room.writer.published == []
    assert act(room, "olivia", "acknowledge") == 303
    assert act(room, "olivia", "note", note="camera 4 shows the draw") == 303
    entry = room.console.board.alerts[room.alerts[0].data.alert_id]
    assert entry.status == "acknowledged" and [a.data.action for a in entry.actions] == ["acknowledge", "note"]
    client = room.client()
    room.login(client, "olivia")
    page = client.get(f"/alerts/{entry.id}").text
    assert 'id="form-note"' in page and 'id="form-close"' not in page and 'id="form-assign"' not in page


def test_an_auditor_reads_but_cannot_acknowledge_note_or_close(room: Room) -> None:
    for action, fields in (
        ("acknowledge", {}),
        ("note", {"note": "x"}),
        ("close", {"reason": "confirmed"}),
        ("assign", {"assignee": "sam"}),
    ):
        assert act(room, "audrey", action, **fields) == 403, action
    assert room.writer.published == []
    client = room.client()
    room.login(client, "audrey")
    page = client.get(f"/alerts/{room.alerts[0].data.alert_id}")
    assert page.status_code == 200
    assert "form-acknowledge" not in page.text and "form-note" not in page.text and "form-close" not in page.text
    assert 'id="form-export"' in page.text


def test_a_supervisor_assigns_and_closes_with_a_reason_and_the_trail_shows_who_did_what(room: Room) -> None:
    alert_id = room.alerts[0].data.alert_id
    assert act(room, "sam", "assign", assignee="olivia") == 303
    assert act(room, "sam", "close", reason="tired") == 400  # not one of the reasons
    assert act(room, "sam", "close") == 400  # a close says why
    assert act(room, "sam", "assign", assignee="nobody") == 400
    assert act(room, "sam", "close", reason="dealer_corrected", note="third card taken back") == 303
    entry = room.console.board.alerts[alert_id]
    assert (entry.status, entry.assignee, entry.reason, entry.closed_by) == ("closed", "olivia", "dealer_corrected", "sam")
    assert act(room, "sam", "acknowledge") == 409  # closed
    assert act(room, "olivia", "note", note="after the close") == 303  # notes go on
    published = room.writer.published
    assert [(e.data.action, e.data.user, e.data.role) for e in published] == [
        ("assign", "sam", "supervisor"),
        ("close", "sam", "supervisor"),
        ("note", "olivia", "operator"),
    ]
    assert all(e.data.alert_id == alert_id and e.data.table_id == "T01" for e in published)
    client = room.client()
    room.login(client, "audrey")
    trail = client.get(f"/alerts/{alert_id}").text
    assert trail.index(">raised<") < trail.index("assign to olivia") < trail.index("close: dealer corrected at the table")
    assert "third card taken back" in trail and "after the close" in trail


# ---- the session's end ---------------------------------------------------------------------


def test_a_session_ends_after_its_idle_time(room: Room, monkeypatch: pytest.MonkeyPatch) -> None:
    client = room.client()
    room.login(client, "olivia")
    assert client.get("/").status_code == 200
    now = time.time()
    monkeypatch.setattr(console_app.time, "time", lambda: now + room.console.config.session_minutes * 60 + 5)
    response = client.get("/")  # the cookie's signature is too old, and the session's last request too
    assert response.status_code == 401 and LOGIN_FORM in response.text
    monkeypatch.undo()
    assert client.get("/").status_code == 401  # it stays ended


def test_a_removed_user_is_out_at_the_next_request(room: Room) -> None:
    client = room.client()
    room.login(client, "olivia")
    room.console.users.remove("olivia")
    assert client.get("/").status_code == 401


# ---- the auditor's export -------------------------------------------------------------------


def test_only_an_auditor_exports_and_the_window_covers_the_shoe_and_the_round(room: Room, tmp_path: Path) -> None:
    import dataclasses

    asked: list[tuple[Any, ...]] = []

    def exporter(start: datetime, end: datetime, tables: list[str], out: Path) -> SimpleNamespace:
        asked.append((start, end, tables))
        out.write_bytes(b"log")
        return SimpleNamespace(
            bytes=3, sha256="ab" * 32, events=1, events_by_type={"baccarat.round.opened": 1}, principal="console", software="x", warnings=[]
        )

    room.console.exporter = exporter
    room.console.config = dataclasses.replace(room.console.config, export_dir=tmp_path / "exports")
    alert = room.alerts[0]
    for user in ("olivia", "sam"):
        client = room.client()
        token = room.login(client, user)
        assert client.post(f"/alerts/{alert.data.alert_id}/export", data={"csrf_token": token}).status_code == 403, user
    assert asked == []
    client = room.client()
    token = room.login(client, "audrey")
    assert client.post(f"/alerts/{alert.data.alert_id}/export", data={}).status_code == 403  # CSRF
    page = client.post(f"/alerts/{alert.data.alert_id}/export", data={"csrf_token": token})
    assert page.status_code == 200, page.text
    [(start, end, tables)] = asked
    assert tables == [alert.data.table_id]
    table = [e for e in room.events if e.data.table_id == alert.data.table_id]
    shoe_start = next(e.time for e in table if isinstance(e, m.ShoeStarted))
    round_done = next(e.time for e in table if isinstance(e, m.RoundCompleted) and e.data.round_id == alert.data.round_id)
    assert start <= shoe_start and round_done < end <= round_done + timedelta(minutes=5)
    link = re.search(r'href="(/exports/[^"]+\.jsonl\.gz)"', page.text)
    assert link is not None
    assert client.get(link.group(1)).content == b"log"
    assert client.get("/exports/..%2Fusers.json").status_code == 404
    other = room.client()
    room.login(other, "sam")
    assert other.get(link.group(1)).status_code == 403  # a supervisor may not download it either
