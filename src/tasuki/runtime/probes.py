"""`/livez` and `/readyz` over HTTP: a thin layer over `runtime/health.py`.

`tasuki worker --health-port P` serves them alone; with `--metrics-port` they are also
served beside `/metrics` on that port (one port to open, one to probe). Each answers
200 or 503 with the report as JSON, so a probe needs the status and a person the body.
The server is the standard library's WSGI server, a thread per request: a probe that
waits on a slow backend never holds up `/metrics` or the next probe.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any, Protocol
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import orjson

from tasuki import logs
from tasuki.errors import TasukiError
from tasuki.runtime.health import Check, Report, WorkerHealth

if TYPE_CHECKING:
    from tasuki.backends.base import Backend
    from tasuki.middleware.base import MiddlewareChain
    from tasuki.runtime.worker import Worker

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class Health(Protocol):
    """What answers the probes: one worker (`WorkerHealth`) or a group of them."""

    def live(self) -> Report: ...

    def ready(self) -> Report: ...


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a probe left hanging never keeps the process from exiting


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # probes every few seconds
        pass


def wsgi_app(health: Health, fallback: WSGIApp | None = None) -> WSGIApp:
    """/livez and /readyz from `health`; any other path to `fallback` (metrics), or 404."""
    answers: dict[str, Callable[[], Report]] = {"/livez": health.live, "/readyz": health.ready}

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        answer = answers.get(environ.get("PATH_INFO", ""))
        if answer is None:
            if fallback is not None:
                return fallback(environ, start_response)
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: /livez or /readyz\n"]
        try:
            report = answer()
        except Exception as exc:  # a probe answers in JSON whatever happens: red, and why
            logs.logger.exception("the health check %s failed", environ.get("PATH_INFO"))
            report = Report(False, {"probe": Check(False, f"the check failed: {exc!r}")})
        body = orjson.dumps(report.as_dict(), option=orjson.OPT_INDENT_2) + b"\n"
        status = "200 OK" if report.ok else "503 Service Unavailable"
        start_response(
            status,
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
                ("Cache-Control", "no-store"),
            ],
        )
        return [body]

    return app


def serve(app: WSGIApp, host: str, port: int, what: str) -> WSGIServer:
    """Serve `app` on host:port from a daemon thread; an error naming `what` if it cannot."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]

        class Server(_Server):
            address_family = family

        server = make_server(host, port, app, Server, handler_class=_QuietHandler)
    except OSError as exc:
        raise TasukiError(f"cannot serve {what} on {host}:{port}: {exc}") from exc
    threading.Thread(target=server.serve_forever, name=f"tasuki-{what}", daemon=True).start()
    return server


def serve_worker_endpoints(
    worker: Worker,
    chain: MiddlewareChain,
    backend: Backend,
    *,
    metrics: tuple[str, int] | None = None,
    health: tuple[str, int] | None = None,
    stuck_after: float,
) -> WorkerHealth:
    """What `tasuki worker` serves: `/metrics` with the probes on (host, port) `metrics`,
    and the probes alone on `health`."""
    checks = WorkerHealth(worker, stuck_after)
    if metrics is not None and health is not None and metrics[1] == health[1]:
        raise TasukiError(
            f"--health-port {health[1]} is the metrics port: the metrics port serves /livez "
            "and /readyz already; drop --health-port or give it another port"
        )
    if metrics is not None:
        from tasuki.middleware.metrics import install, metrics_app

        installed = install(chain, backend, queues=lambda: worker.queues)
        serve(wsgi_app(checks, fallback=metrics_app(installed)), *metrics, what="metrics")
    if health is not None:
        serve(wsgi_app(checks), *health, what="health checks")
    return checks
