"""The dashboard's routes: queues, one queue with its dead letters, one message, actions.

Every page reads what `tasuki stats`, `tasuki dead list` and `tasuki inspect` read: the
stats of each queue (index counts), one page of dead letters, one message by id; and the
reliability counts the backend keeps per queue (`Backend.reliability`: a few counters,
whatever the queue's depth). The
actions (re-drive one, re-drive all, purge the dead letters, purge the queue, cancel
one message) are POSTs
behind a confirmation page; see `tasuki.web.security` for who may send them, and
`tasuki.web.headers` for what every response carries.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

import orjson
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from tasuki.app import App
from tasuki.backends.urls import redact
from tasuki.core.flows import FlowState
from tasuki.core.job import check_message_id, check_queue
from tasuki.core.records import preview
from tasuki.core.reliability import Reliability
from tasuki.errors import InvalidArgument, TasukiError, UnknownFlow, Unsupported
from tasuki.web.chart import rate_chart
from tasuki.web.formatting import ago, bound, seconds, when
from tasuki.web.headers import SecurityHeaders, server_error
from tasuki.web.pages import browse, jobs, workers
from tasuki.web.pages.kit import Kit
from tasuki.web.sampler import Sampler
from tasuki.web.security import COOKIE, Guard, same_origin
from tasuki.web.sessions import SESSION_LIFETIME, Session, Sessions
from tasuki.web.throttle import LoginThrottle, client_key

PAGE_SIZE = 50
MAX_OFFSET = 1_000_000_000
MAX_FORM_BYTES = 64 * 1024
IN_FLIGHT_SHOWN = 50
ACTIONS = {
    "redrive": "Re-drive this dead letter",
    "redrive-all": "Re-drive every dead letter of the queue",
    "purge-dead": "Delete every dead letter of the queue",
    "purge": "Delete EVERY message of the queue: ready, delayed, in flight and dead",
    "cancel": "Cancel this message (a running one is told to stop; nothing of its run is kept)",
    "retry-now": "Make this delayed message ready now",
    "pause": "Pause the queue: no worker leases from it until it is resumed",
    "resume": "Resume the queue",
}
# States in which a message can be cancelled (`app.cancel`).
CANCELLABLE = ("ready", "delayed", "in_flight")


def create_app(
    app: App,
    *,
    token: str | None = None,
    sample_every: float = 5.0,
    sampler: Sampler | None = None,
    session_lifetime: float = SESSION_LIFETIME,
    throttle: LoginThrottle | None = None,
) -> Starlette:
    """The dashboard of `app` as an ASGI application (serve it with any ASGI server).

    With `token`, a login lasts `session_lifetime` seconds at most (less when unused for
    an hour, or at logout); `throttle` is how wrong tokens are slowed per client.
    """
    guard = Guard(token, sessions=Sessions(lifetime=session_lifetime), throttle=throttle)
    sampler = sampler or Sampler(app, every=sample_every)
    templates = Environment(
        loader=PackageLoader("tasuki.web", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    templates.globals.update(
        ago=ago, when=when, quote=quote, actions=ACTIONS, seconds=seconds, bound=bound
    )
    templates.globals.update(preview=preview, urlencode=urlencode, args_text=args_text)
    backend_url = redact(app.url)
    caps = app.backend.capabilities
    inspection = app.backend.capabilities.inspection
    kept = app.backend.capabilities.reliability_counts

    def session_of(request: Request) -> Session | None:
        """The session the gate found for this request (None: no token, bearer, or
        logged out)."""
        return getattr(request.state, "session", None)

    def render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = templates.get_template(name).render(
            url=backend_url,
            csrf=guard.csrf_for(session_of(request)),
            token_set=guard.token is not None,
            notice=request.query_params.get("done", ""),
            **context,
        )
        return HTMLResponse(html, status_code=status)

    async def form(request: Request) -> dict[str, str]:
        """The urlencoded form of a POST (no multipart: the dashboard's forms are small,
        and a bigger body, which the login form would read before any token, is
        refused)."""
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                raise InvalidArgument(f"refusing a form of more than {MAX_FORM_BYTES} bytes")
        text = body.decode("utf-8", "replace")
        return {k: v[0] for k, v in parse_qs(text, keep_blank_values=True).items()}

    def queue_of(request: Request) -> str:
        return check_queue(request.path_params["queue"])

    # -- pages -----------------------------------------------------------------------
    async def queues_page(request: Request) -> Response:
        def read() -> list[dict[str, Any]]:
            rows = []
            for name in sampler.queues():
                stats = app.backend.stats(name)
                rates = sampler.rates(name)
                last = rates[-1] if rates else None
                rows.append(
                    {
                        "name": name,
                        "stats": stats,
                        "rate": last,
                        "reliability": app.backend.reliability(name) if kept else None,
                        "chart": rate_chart(rates, time.time(), sampler.window),
                    }
                )
            return rows

        rows = await run_in_threadpool(read)
        return render(
            request,
            "queues.html",
            queues=rows,
            paused=await run_in_threadpool(app.paused) if caps.pause else set(),
            counts=app.backend.capabilities.settled_counts,
            kept=kept,
            every=sampler.every,
            workflows=app.backend.capabilities.workflows,
        )

    async def queue_page(request: Request) -> Response:
        queue = queue_of(request)
        offset = page_offset(request.query_params.get("offset", ""))

        def read() -> tuple[Any, list[Any], list[Any] | None, Reliability | None]:
            backend = app.backend
            stats = backend.stats(queue)
            letters = backend.dead_letters(queue, limit=PAGE_SIZE + 1, offset=offset)
            held: list[Any] | None = None
            if caps.browsing:  # with each message's job (a listing decodes it)
                held = app.messages(queue, "in_flight", limit=IN_FLIGHT_SHOWN).items
            elif inspection:
                held = backend.in_flight(queue, IN_FLIGHT_SHOWN)
            return stats, letters, held, backend.reliability(queue) if kept else None

        stats, letters, held, reliability = await run_in_threadpool(read)
        return render(
            request,
            "queue.html",
            queue=queue,
            stats=stats,
            letters=letters[:PAGE_SIZE],
            held=held,
            held_shown=IN_FLIGHT_SHOWN,
            reliability=reliability,
            offset=offset,
            more=len(letters) > PAGE_SIZE,
            page_size=PAGE_SIZE,
            chart=rate_chart(sampler.rates(queue), time.time(), sampler.window),
            can_pause=caps.pause,
            paused=caps.pause and queue in await run_in_threadpool(app.paused),
        )

    async def find_message(request: Request) -> Response:
        queue = queue_of(request)
        message_id = request.query_params.get("id", "").strip()
        if not message_id:
            return RedirectResponse(f"/queues/{quote(queue)}", status_code=303)
        return RedirectResponse(
            f"/queues/{quote(queue)}/messages/{quote(message_id, safe='')}", status_code=303
        )

    async def message_page(request: Request) -> Response:
        queue = queue_of(request)
        message_id = check_message_id(request.path_params["id"])

        def read() -> tuple[Any, Any, Any]:
            info = app.inspect(queue, message_id)
            letter = app.backend.dead_letter(queue, message_id) if info.state == "dead" else None
            kept_result = app.backend.result(queue, message_id) if caps.results else None
            return info, letter, kept_result

        info, letter, kept_result = await run_in_threadpool(read)
        status = 404 if info.state == "unknown" else 200
        body = None
        if letter is not None:
            body = letter.body[:4096].decode("utf-8", "replace")
        return render(
            request,
            "message.html",
            status,
            queue=queue,
            info=info,
            letter=letter,
            body=body,
            cancellable=app.backend.capabilities.cancel and info.state in CANCELLABLE,
            can_retry_now=caps.browse_waiting and info.state == "delayed",
            kept_result=kept_result,
            result_text=None
            if kept_result is None or kept_result.value is None
            else kept_result.value[:4096].decode("utf-8", "replace"),
        )

    async def find_flow(request: Request) -> Response:
        flow_id = request.query_params.get("id", "").strip()
        if not flow_id:
            return RedirectResponse("/", status_code=303)
        return RedirectResponse(f"/flows/{quote(flow_id, safe='')}", status_code=303)

    async def flow_page(request: Request) -> Response:
        """A flow's state, its steps (each linked to its message), where it failed with
        the traceback, and a re-drive of the failed step, which resumes the flow."""
        flow_id = request.path_params["id"]
        if not app.backend.capabilities.workflows:
            return PlainTextResponse(f"{backend_url} does not run workflows", status_code=404)

        def read() -> tuple[FlowState | None, bool]:
            try:
                flow = app.flow(flow_id)
            except UnknownFlow:
                return None, False
            failed = flow.error
            dead = failed is not None and any(
                s.message_id == failed.message_id and s.state == "dead" for s in flow.steps
            )
            return flow, dead

        flow, failed_step_dead = await run_in_threadpool(read)
        return render(
            request,
            "flow.html",
            200 if flow is not None else 404,
            flow_id=flow_id,
            flow=flow,
            result=None if flow is None else orjson.dumps(flow.result).decode(),
            failed_step_dead=failed_step_dead,
        )

    async def confirm_page(request: Request) -> Response:
        queue = queue_of(request)
        action = request.query_params.get("action", "")
        if action not in ACTIONS:
            return PlainTextResponse("unknown action", status_code=400)
        message_id = request.query_params.get("id", "")
        if action in ("redrive", "cancel", "retry-now"):
            check_message_id(message_id)
        return render(request, "confirm.html", queue=queue, action=action, message_id=message_id)

    async def act(request: Request) -> Response:
        queue = queue_of(request)
        action = request.path_params["action"]
        if action not in ACTIONS:
            return PlainTextResponse("unknown action", status_code=404)
        fields = await form(request)
        bearer = getattr(request.state, "bearer", False)
        if not bearer and not guard.csrf_ok(fields.get("csrf"), session_of(request)):
            return PlainTextResponse("missing or wrong CSRF token", status_code=403)
        message_id = fields.get("id", "")
        if fields.get("confirm") != "yes":
            query = urlencode({"action": action, **({"id": message_id} if message_id else {})})
            return RedirectResponse(f"/queues/{quote(queue)}/confirm?{query}", status_code=303)

        def run() -> str:
            if action == "retry-now":
                ready = app.retry_now(queue, check_message_id(message_id))
                return f"{message_id} is ready now" if ready else f"{message_id} was not delayed"
            if action == "pause":
                app.pause(queue)
                return f"paused {queue}"
            if action == "resume":
                app.resume(queue)
                return f"resumed {queue}"
            if action == "cancel":
                return f"cancel {message_id}: {app.cancel(queue, check_message_id(message_id))}"
            if action == "redrive":
                count = app.redrive(queue, [check_message_id(message_id)])
                return f"re-drove {count} message(s)"
            if action == "redrive-all":
                return f"re-drove {app.redrive(queue)} message(s)"
            if action == "purge-dead":
                return f"deleted {app.purge_dead(queue)} dead letter(s)"
            return f"purged {app.purge(queue)} message(s)"

        done = await run_in_threadpool(run)
        target = f"/queues/{quote(queue)}"
        if action == "retry-now":
            target += f"/messages/{quote(message_id, safe='')}"
        return RedirectResponse(f"{target}?{urlencode({'done': done})}", status_code=303)

    async def api_queues(request: Request) -> Response:
        def read() -> dict[str, Any]:
            out: dict[str, Any] = {}
            for name in sampler.queues():
                out[name] = app.backend.stats(name).as_dict()
                kept_counts = app.backend.reliability(name) if kept else None
                if kept_counts is not None:
                    out[name]["reliability"] = kept_counts.as_dict()
            return out

        return JSONResponse(await run_in_threadpool(read))

    async def login_page(request: Request) -> Response:
        return render(request, "login.html", next=_local_path(request.query_params.get("next")))

    async def login(request: Request) -> Response:
        """A right token starts a session; a wrong one counts against the client's
        address, and one sent too soon after too many is not even checked (429)."""
        if guard.token is None:
            return RedirectResponse("/", status_code=303)
        fields = await form(request)
        target = _local_path(fields.get("next"))
        client = client_key(request.client.host if request.client else None)
        wait = guard.throttle.wait(client)
        if wait > 0:
            return too_many(request, wait, target)
        if not guard.token_ok(fields.get("token", "")):
            guard.throttle.failed(client)
            return render(request, "login.html", 401, next=target, failed=True)
        guard.sessions.end(request.cookies.get(COOKIE))  # a new login, a new id
        session_id, _ = guard.sessions.start()
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            COOKIE,
            session_id,
            max_age=max(1, math.ceil(guard.sessions.lifetime)),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    def too_many(request: Request, wait: float, target: str) -> Response:
        retry_after = str(max(1, math.ceil(wait)))
        if "text/html" in request.headers.get("accept", ""):
            response: Response = render(
                request, "login.html", 429, next=target, retry_after=retry_after
            )
        else:
            response = PlainTextResponse(
                f"too many wrong tokens from this address: try again in {retry_after} s",
                status_code=429,
            )
        response.headers["Retry-After"] = retry_after
        return response

    async def logout(request: Request) -> Response:
        """Ends the session (the same cookie is refused from now on). Without a live
        session there is nothing to end: the cookie is dropped all the same."""
        session = session_of(request)
        if session is not None:
            fields = await form(request)
            if not guard.csrf_ok(fields.get("csrf"), session):
                return PlainTextResponse("missing or wrong CSRF token", status_code=403)
            guard.sessions.end(request.cookies.get(COOKIE))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, httponly=True, samesite="strict")
        return response

    # -- the gate in front of every route ----------------------------------------------
    async def gate(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        host = request.headers.get("host")
        if not guard.host_ok(host):
            return PlainTextResponse("this dashboard answers on the loopback only", 421)
        bearer = False
        authorization = request.headers.get("authorization")
        if guard.token is not None and authorization:
            client = client_key(request.client.host if request.client else None)
            wait = guard.throttle.wait(client)
            if wait > 0:
                return too_many(request, wait, "/")
            bearer = guard.bearer_ok(authorization)
            if not bearer:
                guard.throttle.failed(client)
        session = None if bearer else guard.sessions.find(request.cookies.get(COOKIE))
        request.state.session, request.state.bearer = session, bearer
        allowed = guard.token is None or bearer or session is not None
        if not allowed and request.url.path not in ("/login", "/logout"):
            if request.method == "GET" and "text/html" in request.headers.get("accept", ""):
                target = "/login?" + urlencode({"next": request.url.path})
                return RedirectResponse(target, status_code=303)
            return PlainTextResponse(
                "a token is required", status_code=401, headers={"WWW-Authenticate": "Bearer"}
            )
        if request.method not in ("GET", "HEAD") and not bearer:
            origin, referer = request.headers.get("origin"), request.headers.get("referer")
            if not same_origin(origin, referer, host):
                return PlainTextResponse("cross-site request refused", status_code=403)
        try:
            response = await call_next(request)
        except Unsupported as exc:
            # What this backend cannot do: said on a page, in the refusal's words.
            if "text/html" in request.headers.get("accept", ""):
                return render(request, "refused.html", 400, refused=str(exc))
            return PlainTextResponse(f"Error: {exc}", status_code=400)
        except TasukiError as exc:
            return PlainTextResponse(f"Error: {exc}", status_code=400)
        return response

    @asynccontextmanager
    async def lifespan(_: Starlette) -> Any:
        sampler.start()
        try:
            yield
        finally:
            sampler.stop()

    def csrf_checked(request: Request, fields: dict[str, str]) -> bool:
        """A script with the bearer token needs no CSRF token; a browser's form does."""
        if getattr(request.state, "bearer", False):
            return True
        return guard.csrf_ok(fields.get("csrf"), session_of(request))

    kit = Kit(app=app, render=render, form=form, csrf_ok=csrf_checked)
    routes = [
        Mount("/static", StaticFiles(packages=[("tasuki.web", "static")]), name="static"),
        *browse.routes(kit),
        *jobs.routes(kit),
        *workers.routes(kit),
        Route("/", queues_page),
        Route("/login", login_page, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/api/queues", api_queues),
        Route("/flows", find_flow),
        Route("/flows/{id:path}", flow_page),
        Route("/queues/{queue}", queue_page),
        Route("/queues/{queue}/find", find_message),
        Route("/queues/{queue}/confirm", confirm_page),
        Route("/queues/{queue}/messages/{id:path}", message_page),
        Route("/queues/{queue}/{action}", act, methods=["POST"]),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(SecurityHeaders), Middleware(BaseHTTPMiddleware, dispatch=gate)],
        exception_handlers={Exception: server_error},
        lifespan=lifespan,
    )


def page_offset(raw: str) -> int:
    """`?offset=` of a page of dead letters: a whole number up to MAX_OFFSET (a bigger
    one is a mistake, and one past what an engine's integers hold would fail in it)."""
    if not raw:
        return 0
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 10 or int(raw) > MAX_OFFSET:
        raise InvalidArgument(f"offset must be a whole number from 0 to {MAX_OFFSET}")
    return int(raw)


def _local_path(target: str | None) -> str:
    """A redirect target on this site only (never `//evil.example`, `/\\evil.example`,
    which browsers read as the same, or a full URL)."""
    if (
        not target
        or not target.startswith("/")
        or target.startswith("//")
        or "\\" in target
        or not target.isprintable()
    ):
        return "/"
    return target


def args_text(info: Any) -> str:
    """A message's decoded arguments as a call would read them: `1, 2, key='v'`."""
    parts = [repr(a) for a in info.args or ()]
    parts += [f"{k}={v!r}" for k, v in (info.kwargs or {}).items()]
    return ", ".join(parts)
