"""The workers page: each worker the backend has seen, what it runs now, the gone ones
marked, and a stop, confirmed first (the worker drains and exits as on SIGTERM, at its
next heartbeat)."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from tasuki.errors import Unsupported
from tasuki.web.pages.kit import Kit


def routes(kit: Kit) -> list[Route]:
    app = kit.app

    async def workers_page(request: Request) -> Response:
        def read() -> tuple[list[Any] | None, str | None]:
            try:
                return app.workers(), None
            except Unsupported as exc:
                return None, str(exc)

        workers, refused = await run_in_threadpool(read)
        return kit.render(
            request, "workers.html", workers=workers, refused=refused, now=time.time()
        )

    async def confirm_stop(request: Request) -> Response:
        return kit.render(request, "stop.html", worker_id=request.path_params["id"])

    async def stop(request: Request) -> Response:
        worker_id = request.path_params["id"]
        fields = await kit.form(request)
        if not kit.csrf_ok(request, fields):
            return PlainTextResponse("missing or wrong CSRF token", status_code=403)
        if fields.get("confirm") != "yes":
            return RedirectResponse(f"/workers/{quote(worker_id, safe='')}/stop", 303)
        stopped = await run_in_threadpool(app.stop_worker, worker_id)
        done = f"asked {worker_id} to stop" if stopped else f"no worker {worker_id} is known"
        return RedirectResponse("/workers?" + urlencode({"done": done}), status_code=303)

    return [
        Route("/workers", workers_page),
        Route("/workers/{id:path}/stop", confirm_stop, methods=["GET"]),
        Route("/workers/{id:path}/stop", stop, methods=["POST"]),
    ]
