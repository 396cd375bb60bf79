"""The console's aiohttp application: login, the pages, their event stream, and the static files.

Authentication (docs/console.md): the console holds one token, the operator's (its client context's),
and calls the services with it. A browser gets in only by presenting that same token: the login form
compares it (in constant time) with the console's and has the scheduler check it too, then sets an
HttpOnly, SameSite=Strict session cookie; the token is never put in a page or a URL. Scripts may send
``Authorization: Bearer <token>`` instead. A console whose context has no token (a platform running
without authentication) makes up a login key at start and prints it with the URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import re
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote

from aiohttp import web

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.console import views
from suanli.console.gateway import Gateway, Targets, Unavailable, tenants

STATIC = Path(__file__).with_name("static")
COOKIE = "suanli_console"
SESSION_TTL_S = 12 * 3600
DEFAULT_REFRESH_S = 2.0
DEFAULT_LISTEN = "127.0.0.1:8088"
# Paths open without a session: the login itself and the files the login page loads.
OPEN_PATHS = ("/login", "/static/")
SECURITY_HEADERS = {
    # Scripts and styles from the console only; inline style attributes colour the heat maps.
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

T = TypeVar("T")
Builder = Callable[[Gateway, dict[str, str]], Awaitable[views.Page]]


@dataclass
class Sessions:
    """Logged-in browsers: session id -> expiry (monotonic seconds), in memory only (a restart logs
    everyone out, which is what a console holding the operator's token should do)."""

    key: str
    ttl_s: float = SESSION_TTL_S
    clock: Callable[[], float] = time.monotonic
    _expiry: dict[str, float] = field(default_factory=dict)

    def matches(self, token: str) -> bool:
        return bool(token) and hmac.compare_digest(token.encode(), self.key.encode())

    def open(self) -> str:
        now = self.clock()
        self._expiry = {s: t for s, t in self._expiry.items() if t > now}
        session = secrets.token_urlsafe(32)
        self._expiry[session] = now + self.ttl_s
        return session

    def valid(self, session: str) -> bool:
        expiry = self._expiry.get(session)
        return expiry is not None and expiry > self.clock()

    def close(self, session: str) -> None:
        self._expiry.pop(session, None)


async def _attempt(call: Awaitable[T]) -> T | Unavailable:
    try:
        return await call
    except Unavailable as exc:
        return exc


def _or_error(value: T | Unavailable, what: str, render: Callable[[T], str]) -> str:
    return views.unavailable(what, str(value)) if isinstance(value, Unavailable) else render(value)


# --- pages: each builds its fragments from the services' answers ---------------------------------


async def overview(gateway: Gateway, _: dict[str, str]) -> views.Page:
    nodes, jobs = await asyncio.gather(_attempt(gateway.nodes()), _attempt(gateway.jobs()))
    return views.Page(
        "Overview",
        {
            "fleet": _or_error(nodes, "nodes", views.fleet_summary),
            "heatmap": _or_error(nodes, "nodes", views.heatmap),
            "jobs": _or_error(jobs, "jobs", views.job_counts),
        },
    )


async def nodes_page(gateway: Gateway, _: dict[str, str]) -> views.Page:
    nodes = await _attempt(gateway.nodes())
    return views.Page("Nodes", {"nodes": _or_error(nodes, "nodes", views.nodes_table)})


async def queues_page(gateway: Gateway, _: dict[str, str]) -> views.Page:
    queues, pending = await asyncio.gather(
        _attempt(gateway.queues()), _attempt(gateway.jobs(pb.JOB_STATE_PENDING))
    )
    if isinstance(pending, Unavailable):
        return views.Page("Queues", {"queues": views.unavailable("pending jobs", str(pending))})
    reasons = views.pending_reasons(pending)
    return views.Page(
        "Queues", {"queues": _or_error(queues, "queues", lambda q: views.queues_table(q, reasons))}
    )


async def jobs_page(gateway: Gateway, _: dict[str, str]) -> views.Page:
    jobs = await _attempt(gateway.jobs())
    return views.Page(
        "Jobs",
        {
            "counts": _or_error(jobs, "jobs", views.job_counts),
            "jobs": _or_error(jobs, "jobs", views.jobs_table),
        },
    )


class JobNotFound(Exception):
    """The job of a detail page does not exist (or the console's token may not see it)."""


async def job_page(gateway: Gateway, match: dict[str, str]) -> views.Page:
    job_id = match["job_id"]
    described, explained = await asyncio.gather(
        _attempt(gateway.describe(job_id)), _attempt(gateway.explain(job_id))
    )
    if isinstance(described, Unavailable):
        if described.not_found:
            raise JobNotFound(job_id)
        return views.Page(f"Job {job_id}", {"job-summary": views.unavailable("job", str(described))})
    job = described.job
    # Each refresh reads the history again, so the timeline is the job's whole record on the first
    # load and grows live after it (the event stream sends it when it changed).
    return views.Page(
        f"Job {job.spec.name or job.id}",
        {
            "job-summary": views.job_summary(job),
            "job-tasks": views.tasks_table(job),
            "job-explanation": _or_error(explained, "explanation", views.explanation),
            "job-attempts": views.attempts(described),
            "job-timeline": views.timeline(described),
        },
    )


async def network_page(gateway: Gateway, _: dict[str, str]) -> views.Page:
    matrix = await _attempt(gateway.network())
    return views.Page("Network", {"network": _or_error(matrix, "network", views.network_matrix)})


async def services_page(gateway: Gateway, _: dict[str, str]) -> views.Page:
    services = await _attempt(gateway.services())
    return views.Page("Services", {"services": _or_error(services, "services", views.services_table)})


async def charges_page(gateway: Gateway, _: dict[str, str]) -> views.Page:
    queues = await _attempt(gateway.queues())
    if isinstance(queues, Unavailable):
        return views.Page("Charges", {"charges": views.unavailable("queues", str(queues))})
    usage = await _attempt(gateway.usage(tenants(queues)))
    return views.Page("Charges", {"charges": _or_error(usage, "charges", views.charges_table)})


# path (a regular expression of the whole path) -> the page's builder; the same table serves the
# pages and their event streams.
PAGES: tuple[tuple[re.Pattern[str], Builder], ...] = (
    (re.compile(r"/"), overview),
    (re.compile(r"/nodes"), nodes_page),
    (re.compile(r"/queues"), queues_page),
    (re.compile(r"/jobs"), jobs_page),
    (re.compile(r"/jobs/(?P<job_id>[^/]+)"), job_page),
    (re.compile(r"/services"), services_page),
    (re.compile(r"/network"), network_page),
    (re.compile(r"/charges"), charges_page),
)
HEADINGS = {
    "fleet": "Fleet",
    "heatmap": "Capacity by region and GPU model",
    "jobs": "Jobs",
    "counts": "By state",
    "job-tasks": "Tasks and placement",
    "job-explanation": "Explanation",
    "job-attempts": "Attempts and use",
    "job-timeline": "Timeline",
}


def resolve(path: str) -> tuple[Builder, dict[str, str]] | None:
    """The builder of the page at ``path`` and what its pattern matched (a job id, unquoted)."""
    for pattern, builder in PAGES:
        found = pattern.fullmatch(path)
        if found:
            return builder, {k: unquote(v) for k, v in found.groupdict().items()}
    return None


# --- the application -----------------------------------------------------------------------------

GATEWAY = web.AppKey("gateway", Gateway)
SESSIONS = web.AppKey("sessions", Sessions)
REFRESH = web.AppKey("refresh_s", float)
STOPPING = web.AppKey("stopping", asyncio.Event)


def _safe_next(value: str) -> str:
    # Only a path of this console: never an absolute URL or a scheme-relative //host (open redirect).
    return value if value.startswith("/") and not value.startswith("//") and "\\" not in value else "/"


def _authenticated(request: web.Request) -> bool:
    sessions = request.app[SESSIONS]
    session = request.cookies.get(COOKIE, "")
    if session and sessions.valid(session):
        return True
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and sessions.matches(token.strip())


@web.middleware
async def guard(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Every path but the login's needs a session (or the bearer token); pages send a browser to the
    login form, anything else gets 401."""
    if not request.path.startswith(OPEN_PATHS) and not _authenticated(request):
        if request.method == "GET" and resolve(request.path) is not None:
            raise web.HTTPSeeOther(f"/login?next={request.path_qs}" if request.path != "/" else "/login")
        raise web.HTTPUnauthorized(text="log in first (docs/console.md)\n")
    try:
        response = await handler(request)
    except web.HTTPException as exc:  # redirects and errors answer with the same headers
        exc.headers.update(SECURITY_HEADERS)
        raise
    response.headers.update(SECURITY_HEADERS)
    return response


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


async def login_form(request: web.Request) -> web.Response:
    return _html(views.login_document("", _safe_next(request.query.get("next", "/"))))


async def login(request: web.Request) -> web.Response:
    form = await request.post()
    token = str(form.get("token", "")).strip()
    next_path = _safe_next(str(form.get("next", "/")))
    sessions = request.app[SESSIONS]
    if not sessions.matches(token):
        return _html(views.login_document("That is not this console's token.", next_path), 401)
    try:
        await request.app[GATEWAY].check_token(token)
    except Unavailable as exc:
        if exc.unauthenticated:
            return _html(views.login_document(f"The scheduler did not accept it: {exc}", next_path), 401)
        return _html(views.login_document(f"Could not check it with the scheduler: {exc}", next_path), 503)
    response = web.HTTPSeeOther(next_path)
    response.set_cookie(
        COOKIE, sessions.open(), httponly=True, samesite="Strict", path="/", max_age=SESSION_TTL_S
    )
    raise response


async def logout(request: web.Request) -> web.Response:
    request.app[SESSIONS].close(request.cookies.get(COOKIE, ""))
    response = web.HTTPSeeOther("/login")
    response.del_cookie(COOKIE, path="/")
    raise response


async def page(request: web.Request) -> web.Response:
    found = resolve(request.path)
    if found is None:
        raise web.HTTPNotFound()
    builder, match = found
    try:
        built = await builder(request.app[GATEWAY], match)
    except JobNotFound as exc:
        raise web.HTTPNotFound(text=f"no job {exc}\n") from None
    stream = f"/events?page={request.path}"
    return _html(views.document(built, request.path, stream, HEADINGS))


def _event(name: str, data: object) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


async def events(request: web.Request) -> web.StreamResponse:
    """The page named by ``?page=`` as server-sent events: every fragment first, then each fragment
    again whenever it changes (checked every refresh interval), a comment line in between."""
    path = request.query.get("page", "/")
    found = resolve(path)
    if found is None:
        raise web.HTTPNotFound(text=f"no page {path}\n")
    builder, match = found
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)
    stopping, refresh = request.app[STOPPING], request.app[REFRESH]
    sent: dict[str, str] = {}
    with contextlib.suppress(ConnectionResetError):
        await response.write(f"retry: {int(refresh * 1000)}\n\n".encode())
        while not stopping.is_set():
            try:
                built = await builder(request.app[GATEWAY], match)
            except JobNotFound:
                await response.write(_event("gone", path))
                break
            changed = {k: v for k, v in built.fragments.items() if sent.get(k) != v}
            await response.write(_event("update", changed) if changed else b": unchanged\n\n")
            sent.update(changed)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), refresh)
    return response


def build_app(gateway: Gateway, sessions: Sessions, refresh_s: float = DEFAULT_REFRESH_S) -> web.Application:
    app = web.Application(middlewares=[guard])
    app[GATEWAY], app[SESSIONS], app[REFRESH] = gateway, sessions, refresh_s
    app[STOPPING] = asyncio.Event()

    async def on_shutdown(app: web.Application) -> None:
        app[STOPPING].set()  # the event streams end instead of holding the shutdown up

    app.on_shutdown.append(on_shutdown)
    app.router.add_get("/login", login_form)
    app.router.add_post("/login", login)
    app.router.add_post("/logout", logout)
    app.router.add_get("/events", events)
    app.router.add_static("/static/", STATIC)
    app.router.add_get("/{tail:.*}", page)
    return app


# --- running it ----------------------------------------------------------------------------------


def split_listen(listen: str) -> tuple[str, int]:
    """HOST:PORT (IPv6 in brackets) as (host, port); ValueError with the reason."""
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--listen {listen!r}: expected HOST:PORT, e.g. {DEFAULT_LISTEN}")
    return host.strip("[]"), int(port)


@dataclass
class RunningConsole:
    """A started console: where to open it, the login key the browser needs, and how to stop it."""

    url: str
    login_key: str
    key_generated: bool  # no token in the context: `login_key` was made up at start, print it
    runner: web.AppRunner
    gateway: Gateway

    async def stop(self) -> None:
        await self.runner.cleanup()
        await self.gateway.close()


async def start_console(
    targets: Targets,
    token: str,
    ca_pem: bytes | None,
    listen: str = DEFAULT_LISTEN,
    refresh_s: float = DEFAULT_REFRESH_S,
) -> RunningConsole:
    """Serve the console for the services at ``targets``, calling them with ``token`` (and TLS trusting
    ``ca_pem`` when given), on ``listen`` (port 0: any free one)."""
    host, port = split_listen(listen)
    gateway = Gateway(targets, token, ca_pem)
    key = token or secrets.token_urlsafe(24)
    runner = web.AppRunner(
        build_app(gateway, Sessions(key), refresh_s), shutdown_timeout=5.0, access_log=None
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        await gateway.close()
        raise
    bound = runner.addresses[0][1]
    shown = f"[{host}]" if ":" in host else host
    return RunningConsole(f"http://{shown}:{bound}/", key, not token, runner, gateway)


class BackgroundConsole:
    """The console on an event loop of its own thread, for a caller that is not async (`suanli up`)."""

    def __init__(
        self, targets: Targets, token: str, ca_pem: bytes | None, listen: str = DEFAULT_LISTEN
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="suanli-console", daemon=True)
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(start_console(targets, token, ca_pem, listen), self._loop)
        try:
            self.running = started.result(timeout=30)
        except BaseException:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            raise

    @property
    def url(self) -> str:
        return self.running.url

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.running.stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
