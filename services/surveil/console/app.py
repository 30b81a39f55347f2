"""The console's web side: a Starlette app (Jinja2 templates, server-sent events), served by
uvicorn (``surveil.console.service``).

Every request but the login form and Alertmanager's webhook needs a session: without one the
answer is the login page and nothing else (status 401, whatever was asked). A session is a
signed cookie (Starlette's SessionMiddleware, itsdangerous) that ends after
``CONSOLE_SESSION_MINUTES`` without a request; it names the user, whose role is read from the
users file at every request (a removed user is out at once). Every form carries the session's
CSRF token (a synchronizer token: random, kept in the signed session, compared in constant time);
a POST without it is refused. The cookie is SameSite=Strict as well.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import msgspec
import structlog
from jinja2 import ChoiceLoader, Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from prometheus_client import Counter, Gauge
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Receive, Scope, Send

from ..analysis import incident_page as rendering
from ..analysis.incident import IncidentCollector
from ..events import models
from .board import MACAU, REASONS, SEVERITIES, STATUSES, AlertEntry, Board, Tile, refusal, shift_start
from .config import ConsoleConfig
from .users import Permission, UserStore, may

log = structlog.get_logger()

LOGINS = Counter("surveil_console_logins_total", "Login attempts, by result.", ["result"])
ACTIONS = Counter("surveil_console_actions_total", "Alert actions published, by action.", ["action"])
CLIENTS = Gauge("surveil_console_stream_clients", "Pages open on the live stream.")
PAGES_FIRING = Gauge("surveil_console_pages_firing", "Alertmanager pages the banner shows.")

PUBLIC = frozenset({"/login", "/api/alertmanager"})
QUEUE_SIZE = 1000  # events a page may lag behind before its stream is cut (it reconnects and reloads)
MAX_WEBHOOK_BYTES = 1 << 20


EXPORT_BEFORE = timedelta(minutes=1)  # the window starts this long before the shoe (or round) did
EXPORT_AFTER = timedelta(minutes=2)  # and ends this long after the round (its settlements follow it)
EXPORT_NAME = re.compile(r"^[A-Za-z0-9._-]+\.(jsonl\.gz|manifest\.json)$")


class Exporter(Protocol):
    """``surveil.analysis.export.export_log`` with the console's Kafka settings bound."""

    def __call__(self, start: datetime, end: datetime, tables: list[str], out: Path) -> Any: ...


class Writer(Protocol):
    """Where the console's actions go: ``feed.ActionWriter`` (the topic) in the service."""

    def publish(self, event: models.AlertAction, timeout: float = 10.0) -> None: ...


# ---- Alertmanager's webhook (version 4) ------------------------------------------------------


class AmAlert(msgspec.Struct, frozen=True):
    status: str
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    startsAt: str = ""  # noqa: N815 (Alertmanager's names)
    fingerprint: str = ""


class AmWebhook(msgspec.Struct, frozen=True):
    version: str
    status: str
    alerts: list[AmAlert]


@dataclass(frozen=True, slots=True)
class Paging:
    fingerprint: str
    name: str
    severity: str
    summary: str
    since: str
    runbook_url: str


# ---- the live stream -----------------------------------------------------------------------


@dataclass(eq=False)
class Client:
    floor: bool
    expires: float
    queue: asyncio.Queue[tuple[str, str]] = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))
    cut: bool = False


class Hub:
    """The open pages' streams: each gets every message (tiles only if it shows the floor)."""

    def __init__(self) -> None:
        self.clients: set[Client] = set()

    def publish(self, event: str, data: str, *, floor_only: bool = False) -> None:
        for client in list(self.clients):
            if floor_only and not client.floor:
                continue
            try:
                client.queue.put_nowait((event, data))
            except asyncio.QueueFull:
                client.cut = True  # too far behind: its page reconnects and reloads


# ---- the console -----------------------------------------------------------------------------


def template_environment() -> Environment:
    env = Environment(
        loader=ChoiceLoader([PackageLoader("surveil.console", "templates"), rendering.template_loader()]),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    rendering.install_filters(env)
    env.filters["macau"] = lambda t: t.astimezone(MACAU).strftime("%H:%M:%S") if t else "—"
    env.filters["utc"] = lambda t: t.astimezone(UTC).strftime("%H:%M:%S") if t else "—"
    env.globals["REASONS"] = REASONS
    return env


class Console:
    """The console's state and what feeds it: the board, the incident collector, the stream."""

    def __init__(
        self, config: ConsoleConfig, users: UserStore, writer: Writer, source: str = "surveil-console", exporter: Exporter | None = None
    ) -> None:
        self.config = config
        self.exporter = exporter
        self.users = users
        self.writer = writer
        self.source = source
        self.board = Board()
        self.collector = IncidentCollector("live topics")
        self.hub = Hub()
        self.pages: dict[str, Paging] = {}
        self.caught_up = False
        self.feed_error: str | None = None
        self.env = template_environment()
        self.applied: dict[str, asyncio.Future[None]] = {}  # action id -> resolved when read back
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop the board lives on (set by the first action)

    # -- the feed (on the event loop) --

    def deliver(self, batch: list[models.Event]) -> None:
        changed: dict[str, AlertEntry] = {}
        tiles: dict[str, Tile] = {}
        for event in batch:
            if isinstance(event, models.AlertCheckpoint):
                continue  # the alert log's proof, for `surveil verify`: no floor event (its time is the detectors' clock)
            if isinstance(event, models.AlertRaised):
                self.collector.alert(event)
            elif not isinstance(event, models.AlertAction):
                self.collector.event(event)
            result = self.board.ingest(event)
            if isinstance(result, AlertEntry):
                changed[result.id] = result
                tiles[result.data.table_id] = self.board.tile(result.data.table_id)
            elif isinstance(result, Tile):
                tiles[result.table_id] = result
            if isinstance(event, models.AlertAction):
                waiting = self.applied.pop(event.id, None)
                if waiting is not None and not waiting.done():
                    waiting.set_result(None)
        if not self.caught_up:
            return
        for entry in changed.values():
            self.hub.publish("alert", json.dumps({"id": entry.id, "seq": entry.seq, "html": self.render_row(entry)}))
        if changed:
            self.hub.publish("counts", json.dumps(self.counts()))
        now = self.floor_clock()
        for tile in tiles.values():
            self.hub.publish("tile", json.dumps({"id": tile.table_id, "html": self.render_tile(tile, now)}), floor_only=True)

    def floor_clock(self) -> datetime:
        """Now, by the floor's clock (the latest event's time; the wall clock before any): the
        shift of a replayed or simulated floor is the one its events are in."""
        return self.board.latest or datetime.now(UTC)

    def mark_caught_up(self) -> None:
        self.caught_up = True
        self.hub.publish("ready", "{}")

    def counts(self) -> dict[str, int]:
        counts = self.board.counts()
        return {s: counts.get(s, 0) for s in SEVERITIES}

    # -- rendering pieces shared by pages and the stream --

    def render_row(self, entry: AlertEntry) -> str:
        return self.env.get_template("_row.html.j2").render(e=entry)

    def render_tile(self, tile: Tile, now: datetime) -> str:
        since = shift_start(now, self.config.shift_starts)
        return self.env.get_template("_tile.html.j2").render(
            t=tile, worst=self.board.worst_open(tile.table_id), shift_alerts=self.board.alerts_since(tile.table_id, since)
        )

    def render_banner(self) -> str:
        return self.env.get_template("_banner.html.j2").render(pages=list(self.pages.values()))

    # -- handling --

    async def act(self, data: models.AlertActionData) -> None:
        """Publish one action and wait (a little) until the console has read it back."""
        event = models.AlertAction(
            specversion="1.0",
            id=str(uuid.uuid4()),
            source=self.source,
            time=datetime.now(UTC),
            subject=data.table_id,
            datacontenttype="application/json",
            data=data,
        )
        loop = self.loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self.applied[event.id] = future
        try:
            await asyncio.to_thread(self.writer.publish, event)
            ACTIONS.labels(data.action).inc()
            await asyncio.wait_for(future, timeout=3.0)
        except TimeoutError:
            pass  # stored; the page shows it when the console reads it back
        finally:
            self.applied.pop(event.id, None)


# ---- requests ----------------------------------------------------------------------------------


class AuthMiddleware:
    """Inside SessionMiddleware: a request without a live session gets the login page."""

    def __init__(self, app: ASGIApp, console: Console, templates: Jinja2Templates) -> None:
        self.app, self.console, self.templates = app, console, templates

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session: dict[str, Any] = scope["session"]
        session.setdefault("csrf", secrets.token_urlsafe(32))
        if scope["path"] in PUBLIC:
            await self.app(scope, receive, send)
            return
        now = time.time()
        user = self.console.users.get(session.get("user", "")) if session.get("user") else None
        if user is None or now - float(session.get("seen", 0)) > self.console.config.session_minutes * 60:
            expired = user is not None
            session.pop("user", None)  # the CSRF token stays: the page's other requests (its icon,
            session.pop("seen", None)  # its stream) must not turn the login form's token stale
            response = login_page(
                Request(scope), self.templates, status=401, message="Your session ended: log in again." if expired else ""
            )
            await response(scope, receive, send)
            return
        session["seen"] = now
        scope["user"] = user
        await self.app(scope, receive, send)


def login_page(request: Request, templates: Jinja2Templates, status: int = 200, message: str = "") -> Response:
    return templates.TemplateResponse(
        request,
        "login.html.j2",
        {"csrf": request.session["csrf"], "message": message},
        status_code=status,
        headers={"Cache-Control": "no-store"},
    )


class Forbidden(Exception):
    pass


async def checked_form(request: Request) -> FormData:
    """The request's form, once its CSRF token (field ``csrf_token`` or header ``X-CSRF-Token``)
    is the session's; ``Forbidden`` otherwise."""
    form = await request.form()
    token = form.get("csrf_token") or request.headers.get("x-csrf-token") or ""
    expected = request.session.get("csrf", "")
    if not isinstance(token, str) or not expected or not hmac.compare_digest(token.encode(), expected.encode()):
        raise Forbidden("the form's CSRF token is missing or wrong: reload the page")
    return form


def create_app(console: Console) -> Starlette:
    templates = Jinja2Templates(env=console.env)
    config = console.config

    def page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
        user = request.scope["user"]
        base = {
            "user": user,
            "may": lambda what: may(user.role, what),
            "csrf": request.session["csrf"],
            "counts": console.counts(),
            "banner": Markup(console.render_banner()),
            "caught_up": console.caught_up,
            "feed_error": console.feed_error,
        }
        return templates.TemplateResponse(request, name, base | context, status_code=status, headers={"Cache-Control": "no-store"})

    def require(request: Request, what: Permission) -> None:
        if not may(request.scope["user"].role, what):
            raise Forbidden(f"a {request.scope['user'].role} may not {what}")

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return login_page(request, templates)
        try:
            form = await checked_form(request)
        except Forbidden as error:
            return login_page(request, templates, status=403, message=str(error))
        name, password = str(form.get("name", "")), str(form.get("password", ""))
        user = await asyncio.to_thread(console.users.authenticate, name, password)
        if user is None:
            LOGINS.labels("refused").inc()
            log.warning("console.login_refused", user=name[:40])
            return login_page(request, templates, status=401, message="Wrong name or password.")
        LOGINS.labels("ok").inc()
        log.info("console.login", user=user.name, role=user.role)
        request.session.clear()  # a new session: no token or state from before the login
        request.session.update({"user": user.name, "csrf": secrets.token_urlsafe(32), "seen": time.time()})
        return RedirectResponse("/", status_code=303)

    async def logout(request: Request) -> Response:
        await checked_form(request)
        request.session.clear()
        return RedirectResponse("/login", status_code=303)

    async def alert_list(request: Request) -> Response:
        q = request.query_params
        filters = {k: q.get(k, "") for k in ("table", "rule", "severity", "status")}
        entries = console.board.listing(**filters, limit=config.max_rows)
        return page(
            request,
            "list.html.j2",
            {
                "entries": entries,
                "filters": filters,
                "rules": console.board.rules(),
                "tables": sorted(console.board.by_table),
                "severities": SEVERITIES,
                "statuses": STATUSES,
                "total": len(console.board.alerts),
            },
        )

    async def alert_page(request: Request) -> Response:
        entry = console.board.alerts.get(request.path_params["alert_id"])
        if entry is None:
            return page(request, "missing.html.j2", {"what": "alert " + request.path_params["alert_id"]}, status=404)
        view = rendering.incident_view(console.collector, entry.id)
        return page(request, "alert.html.j2", {"e": entry, "view": view, "users": sorted(console.users.users())})

    async def handling(request: Request) -> Response:
        entry = console.board.alerts.get(request.path_params["alert_id"])
        if entry is None:
            return PlainTextResponse("no such alert", status_code=404)
        return page(request, "_handling.html.j2", {"e": entry, "users": sorted(console.users.users())})

    async def alert_action(request: Request) -> Response:
        form = await checked_form(request)
        entry = console.board.alerts.get(request.path_params["alert_id"])
        if entry is None:
            return PlainTextResponse("no such alert", status_code=404)
        action = str(form.get("action", ""))
        if action not in ("acknowledge", "assign", "note", "close"):
            return PlainTextResponse(f"no action {action!r}", status_code=400)
        require(request, action)  # type: ignore[arg-type]
        user = request.scope["user"]
        note = str(form.get("note", "")).strip() or None
        try:
            data = models.AlertActionData(
                table_id=entry.data.table_id,
                alert_id=entry.id,
                action=action,  # type: ignore[arg-type]
                user=user.name,
                role=user.role,
                assignee=(str(form.get("assignee", "")) or None) if action == "assign" else None,
                reason=(str(form.get("reason", "")) or None) if action == "close" else None,  # type: ignore[arg-type]
                note=note,
            )
            msgspec.convert(msgspec.to_builtins(data), models.AlertActionData)  # the contract's limits (reason, lengths)
        except (ValueError, msgspec.ValidationError) as error:
            return PlainTextResponse(f"not a valid action: {error}", status_code=400)
        if action == "assign" and data.assignee not in console.users.users():
            return PlainTextResponse(f"no user {data.assignee}", status_code=400)
        if why_not := refusal(entry, data):
            return PlainTextResponse(f"not done: {why_not}", status_code=409)
        await console.act(data)
        log.info("console.action", user=user.name, action=action, alert_id=entry.id)
        return RedirectResponse(f"/alerts/{entry.id}", status_code=303)

    async def export(request: Request) -> Response:
        """The auditor's export of the alert's round: its table's events from the shoe's start
        to a little after the round, as a replayable log with its manifest."""
        await checked_form(request)
        require(request, "export")
        entry = console.board.alerts.get(request.path_params["alert_id"])
        if entry is None:
            return PlainTextResponse("no such alert", status_code=404)
        if console.exporter is None:
            return PlainTextResponse("this console exports nothing (no Kafka settings)", status_code=503)
        start, end = export_window(console, entry)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        out = config.export_dir / f"{entry.data.table_id}-{entry.id[:16]}-{stamp}.jsonl.gz"
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            manifest = await asyncio.to_thread(console.exporter, start, end, [entry.data.table_id], out)
        except Exception as error:  # the broker away, the window empty: said on the page
            log.error("console.export_failed", alert_id=entry.id, error=str(error))
            return page(request, "export.html.j2", {"e": entry, "error": str(error), "start": start, "end": end}, status=502)
        log.info("console.export", user=request.scope["user"].name, alert_id=entry.id, file=out.name, events=manifest.events)
        return page(request, "export.html.j2", {"e": entry, "m": manifest, "error": None, "start": start, "end": end, "name": out.name})

    async def exported(request: Request) -> Response:
        require(request, "export")
        name = request.path_params["name"]
        path = config.export_dir / name
        if not EXPORT_NAME.match(name) or not path.is_file():
            return PlainTextResponse("no such export", status_code=404)
        return FileResponse(path, filename=name)

    async def floor(request: Request) -> Response:
        now = console.floor_clock()
        tiles = [console.board.tiles[t] for t in sorted(console.board.tiles)]
        rendered = [Markup(console.render_tile(tile, now)) for tile in tiles]
        return page(request, "floor.html.j2", {"tiles": rendered, "shift_start": shift_start(now, config.shift_starts)})

    async def stream(request: Request) -> Response:
        client = Client(
            floor=request.query_params.get("floor") == "1", expires=float(request.session["seen"]) + config.session_minutes * 60
        )
        console.hub.clients.add(client)
        CLIENTS.set(len(console.hub.clients))

        async def messages() -> AsyncIterator[dict[str, str]]:
            try:
                while not client.cut and time.time() < client.expires:
                    try:
                        event, data = await asyncio.wait_for(client.queue.get(), timeout=5.0)
                    except TimeoutError:
                        continue
                    yield {"event": event, "data": data}
                yield {"event": "reload", "data": "{}"}
            finally:
                console.hub.clients.discard(client)
                CLIENTS.set(len(console.hub.clients))

        return EventSourceResponse(messages(), ping=15, headers={"Cache-Control": "no-store"})

    async def alertmanager(request: Request) -> Response:
        token = config.webhook_token
        given = request.headers.get("authorization", "")
        if not token:
            return PlainTextResponse("webhook disabled: ALERTMANAGER_WEBHOOK_TOKEN is not set", status_code=503)
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            return PlainTextResponse("wrong or missing bearer token", status_code=401, headers={"WWW-Authenticate": "Bearer"})
        body = await request.body()
        if len(body) > MAX_WEBHOOK_BYTES:
            return PlainTextResponse("too large", status_code=413)
        try:
            hook = msgspec.json.decode(body, type=AmWebhook)
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as error:
            return PlainTextResponse(f"not an Alertmanager webhook: {error}", status_code=400)
        if hook.version != "4":
            return PlainTextResponse(f"webhook version {hook.version}, not 4", status_code=400)
        for a in hook.alerts:
            key = a.fingerprint or json.dumps(a.labels, sort_keys=True)
            if a.status == "firing":
                console.pages[key] = Paging(
                    key,
                    a.labels.get("alertname", "?"),
                    a.labels.get("severity", ""),
                    a.annotations.get("summary") or a.annotations.get("description", ""),
                    a.startsAt,
                    a.annotations.get("runbook_url", ""),
                )
            else:
                console.pages.pop(key, None)
        PAGES_FIRING.set(len(console.pages))
        console.hub.publish("page", json.dumps({"html": console.render_banner()}))
        return JSONResponse({"firing": len(console.pages)})

    async def forbidden(request: Request, error: Exception) -> Response:
        return PlainTextResponse(str(error), status_code=403)

    routes = [
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/", alert_list),
        Route("/alerts/{alert_id}", alert_page),
        Route("/alerts/{alert_id}/handling", handling),
        Route("/alerts/{alert_id}/actions", alert_action, methods=["POST"]),
        Route("/alerts/{alert_id}/export", export, methods=["POST"]),
        Route("/exports/{name}", exported),
        Route("/floor", floor),
        Route("/events", stream),
        Route("/api/alertmanager", alertmanager, methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("surveil.console", "static"), ("surveil.analysis", "static")]), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(
                SessionMiddleware,
                secret_key=config.secret_key,
                session_cookie="surveil_console",
                max_age=config.session_minutes * 60,
                same_site="strict",
                https_only=config.secure_cookies,
            ),
            Middleware(AuthMiddleware, console=console, templates=templates),
        ],
        exception_handlers={Forbidden: forbidden},
    )
    return app


def export_window(console: Console, entry: AlertEntry) -> tuple[datetime, datetime]:
    """From the start of the alert's shoe (else its round, else the alert) to a little after its
    round (else the alert); by the events' times, which the floor's producers stamp their records with."""
    d = entry.data
    table = console.collector.tables.get(d.table_id)
    rnd = table.round(d.round_id) if table and d.round_id else None
    shoe = table.find_shoe(d.shoe_id or (rnd.shoe_id if rnd else None)) if table else None
    first = [t for t in ((shoe.started_at if shoe else None), (rnd.opened_at if rnd else None), entry.alert.time) if t is not None]
    last = [t for t in ((rnd.completed_at if rnd else None), entry.alert.time) if t is not None]
    start = min(first) - EXPORT_BEFORE
    end = min(max(last) + EXPORT_AFTER, datetime.now(UTC))
    return start, max(end, start + timedelta(seconds=1))
