"""The console's Starlette application: routes, authentication, CSRF, security headers, live updates.

Pages are rendered on the server (Jinja2, autoescaped); the browser runs only the vendored htmx
and its SSE extension (pgwork/ui/static), for the live regions. Every read and action goes
through `Console` (pgwork/ui/data.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from pgwork.credentials import redact
from pgwork.ui import charts
from pgwork.ui.data import CHART_CAP, COUNT_CAP, Console, action_states
from pgwork.ui.filters import BULK_CAP, BULK_SCAN, PAGE, SCAN, STATES, FilterError, parse_filter, parse_ids
from pgwork.ui.listen import ChangeFeed
from pgwork.ui.render import environment
from pgwork.ui.security import CSRF_COOKIE, CSRF_FIELD, HEADERS, AuthConfig, authenticate, csrf_ok, new_token

log = logging.getLogger("pgwork.ui")
# The functions the Workers and Limits pages read through (the reader profile's, unless a grant
# was taken back): a role without them gets a page saying so, not an error.
RUNNING_FUNCTION = "pgwork.running_jobs(timestamptz)"
LIMITS_FUNCTION = "pgwork.limits(timestamptz)"
WORKER_ROWS = 200  # the Workers page lists at most this many workers


@dataclass(frozen=True)
class Settings:
    auth: AuthConfig
    live: str = "sse"  # "sse" (server-sent events) or "poll" (the browser asks every `interval`)
    interval: float = 2.0  # seconds between live refreshes (and the server's poll without LISTEN)
    listen: bool = True  # wake live updates by LISTEN (a direct connection; never behind a transaction pooler)
    stuck_after: float = 60.0  # a running job whose heartbeat is older than this is marked stuck
    secure_cookie: bool = False  # the CSRF cookie only over HTTPS (set behind TLS)


def create_app(console: Console, settings: Settings) -> Starlette:
    env = environment()
    feed = ChangeFeed(console.queue.dsn) if settings.listen and settings.live == "sse" else None

    def page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        may = request.state.may
        html = env.get_template(name).render(
            request=request,
            may=may,
            user=request.state.user,
            csrf=request.state.csrf,
            settings=settings,
            states=STATES,
            csrf_field=CSRF_FIELD,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def overview_context() -> dict[str, Any]:
        bars = [charts.Bar(b.bucket_start, b.finished, b.dead) for b in console.buckets()]
        return {
            "stats": console.overview(),
            "cap": COUNT_CAP,
            "chart_cap": CHART_CAP,
            "throughput": charts.throughput_svg(bars, CHART_CAP),
            "failures": charts.failure_svg(bars),
            "finished_last": bars[-1].finished if bars else 0,
        }

    def overview(request: Request) -> Response:
        return page(request, "overview.html", **overview_context())

    def overview_live(request: Request) -> Response:
        return page(request, "_overview.html", **overview_context())

    def jobs(request: Request) -> Response:
        f = parse_filter(request.query_params)
        ignored = f.uses_payload() and not request.state.may.read_contents
        if ignored:
            f = replace(f, payload_path=None, payload_value=None)
        result = console.find(f, request.state.may)
        return page(request, "jobs.html", f=f, page_=result, scan=SCAN, page_size=PAGE, payload_ignored=ignored)

    def job(request: Request) -> Response:
        found = console.job(int(request.path_params["job_id"]))
        if found is None:
            return page(request, "error.html", 404, message=f"no job {request.path_params['job_id']}")
        return page(
            request,
            "job.html",
            job=found.detail,
            contents=found.contents,
            error=found.error,
            error_length=found.error_length,
        )

    def running(request: Request) -> Response:
        return page(request, "running.html", rows=console.running(settings.stuck_after))

    def running_live(request: Request) -> Response:
        return page(request, "_running.html", rows=console.running(settings.stuck_after))

    def workers(request: Request) -> Response:
        if not console.may_read(RUNNING_FUNCTION):
            return page(request, "refused.html", what="the running jobs, so it cannot list workers")
        rows, more = console.workers(settings.stuck_after, WORKER_ROWS)
        return page(request, "workers.html", rows=rows, more=more, shown=WORKER_ROWS)

    def limits(request: Request) -> Response:
        if not console.may_read(LIMITS_FUNCTION):
            return page(request, "refused.html", what="the per-type limits")
        return page(request, "limits.html", rows=console.limits())

    def dead(request: Request) -> Response:
        return page(request, "dead.html", rows=console.dead())

    def actions(request: Request) -> Response:
        return page(request, "actions.html", rows=console.actions())

    def confirm(request: Request) -> Response:
        """A bulk action's count, before anything changes; the form posts the same filter."""
        action = request.query_params.get("action", "")
        if action not in ("retry", "cancel"):
            raise FilterError("action", "use retry or cancel")
        f = parse_filter(request.query_params)
        ids = console.matching_ids(f, request.state.may, action)
        return page(
            request,
            "confirm.html",
            action=action,
            f=f,
            n=len(ids),
            cap=BULK_CAP,
            bulk_scan=BULK_SCAN,
            movable=action_states(action, f.state),
        )

    async def act(request: Request) -> Response:
        body = await request.body()
        if len(body) > 256 * 1024:
            return PlainTextResponse("refused: the form is over 256 KiB", 413)
        # The console's forms are urlencoded; parsed here, so no multipart library is needed.
        form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        if not csrf_ok(request.cookies.get(CSRF_COOKIE), form.get(CSRF_FIELD, "")):
            return PlainTextResponse("refused: the form's CSRF token is missing or wrong; reload the page", 403)
        if not request.state.may.act:
            return PlainTextResponse(f"refused: role {request.state.may.role} may not retry or cancel", 403)
        action = form.get("action", "")
        if action not in ("retry", "cancel"):
            raise FilterError("action", "use retry or cancel")
        fields = form
        if "ids" in fields:
            ids = parse_ids(fields["ids"])
            target = "job " + ", ".join(map(str, ids)) if len(ids) <= 20 else f"{len(ids)} jobs by id"
        else:
            f = parse_filter(fields)
            ids = await run_in_threadpool(console.matching_ids, f, request.state.may, action)
            target = f"filter {f.describe()}"
        result = await run_in_threadpool(console.act, action, ids, actor=request.state.user, target=target)
        return page(request, "result.html", result=result, target=target, back=fields.get("back", "/jobs"))

    async def events(request: Request) -> Response:
        """Server-sent events: the overview counts and the running list, re-rendered on every
        change LISTEN reports (or every `interval` without it), at most once per `interval`."""

        async def stream() -> AsyncIterator[str]:
            while not await request.is_disconnected():
                for name, render in (("overview", overview_live), ("running", running_live)):
                    body = (await run_in_threadpool(render, request)).body
                    text = bytes(body).decode()
                    yield f"event: {name}\n" + "".join(f"data: {line}\n" for line in text.splitlines()) + "\n"
                if feed is not None:
                    await feed.wait(settings.interval)
                else:
                    await asyncio.sleep(settings.interval)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"X-Accel-Buffering": "no"})

    async def on_filter_error(request: Request, exc: Exception) -> Response:
        return page(request, "error.html", 400, message=str(exc))

    async def on_error(request: Request, exc: Exception) -> Response:
        # The first line only, scrubbed: no connection string or secret reaches a page or a log.
        text = redact(str(exc)).strip().splitlines()
        log.error("console error on %s: %s: %s", request.url.path, type(exc).__name__, text[0] if text else "")
        return PlainTextResponse("the console hit an error; its log says which", 500)

    routes = [
        Route("/", overview),
        Route("/live/overview", overview_live),
        Route("/jobs", jobs),
        Route("/jobs/{job_id:int}", job),
        Route("/running", running),
        Route("/live/running", running_live),
        Route("/workers", workers),
        Route("/limits", limits),
        Route("/dead", dead),
        Route("/actions", actions),
        Route("/confirm", confirm),
        Route("/act", act, methods=["POST"]),
        Route("/events", events),
        Route("/favicon.ico", lambda request: RedirectResponse("/static/favicon.svg", 301)),
        Mount("/static", StaticFiles(packages=[("pgwork.ui", "static")]), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(Guard, console=console, settings=settings)],
        exception_handlers={FilterError: on_filter_error, Exception: on_error},
        lifespan=_lifespan(feed),
    )
    return app


def _lifespan(feed: ChangeFeed | None) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if feed is not None:
                feed.close()

    return lifespan


class Guard(BaseHTTPMiddleware):
    """Authentication, the role's rights, the CSRF cookie and the security headers, for every request."""

    def __init__(self, app: Any, console: Console, settings: Settings) -> None:
        super().__init__(app)
        self.console = console
        self.settings = settings

    async def dispatch(self, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        user = authenticate(self.settings.auth, request.headers, request.client.host if request.client else None)
        if user is None:
            response: Response = PlainTextResponse("authentication required", 401)
            if self.settings.auth.mode == "basic":
                response.headers["WWW-Authenticate"] = 'Basic realm="pgwork", charset="UTF-8"'
        elif request.method == "POST" and not _same_origin(request):
            response = PlainTextResponse("refused: the request came from another site", 403)
        else:
            request.state.user = user
            token = request.cookies.get(CSRF_COOKIE) or new_token()
            request.state.csrf = token
            if not request.url.path.startswith("/static/"):
                request.state.may = await run_in_threadpool(self.console.may)
            response = await call_next(request)
            if request.cookies.get(CSRF_COOKIE) != token:
                response.set_cookie(
                    CSRF_COOKIE, token, httponly=True, samesite="strict", secure=self.settings.secure_cookie, path="/"
                )
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        return response


def _same_origin(request: Request) -> bool:
    """A POST's Origin (when the browser sends one) names this console's host."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return origin.split("://", 1)[-1] == request.headers.get("host", "")
