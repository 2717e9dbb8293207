"""The job browser: a queue's messages by state, filtered by job name and arguments,
newest or oldest first, a page at a time; and the bulk actions on what a filter matches.

A bulk action is asked for on a confirmation page that shows how many messages the filter
matches now; confirmed, one POST retries or cancels them all (`app.retry_matching` /
`app.cancel_matching`: in batches, each message only if still in the state shown).
A backend that cannot list a state says so on the page (its refusal's text).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from tasuki.app import console
from tasuki.core.console import BROWSE_STATES, check_state
from tasuki.core.job import check_queue
from tasuki.errors import Unsupported
from tasuki.web.pages.kit import Kit, parse_match

PAGE = 50
# A confirmation page counts at most this many matches (and says "at least" beyond).
COUNT_LIMIT = 100_000
BULK = {"retry": "Retry now", "cancel": "Cancel"}


def filters(request: Request, first: str = "ready") -> dict[str, str]:
    """The listing's filter as the query string has it (empty values dropped); the state
    `first` where it names none."""
    q = request.query_params
    raw = {
        "state": q.get("state", first) or first,
        "job": q.get("job", "").strip(),
        "match": q.get("match", "").strip(),
        "order": "newest" if q.get("order") == "newest" else "oldest",
    }
    check_state(raw["state"])
    return {k: v for k, v in raw.items() if v}


def count_matching(kit: Kit, queue: str, chosen: dict[str, str]) -> tuple[int, bool]:
    """How many messages the filter matches now, and whether the count stopped short."""
    app = kit.app
    return console.count_matching(
        app.backend,
        app.codec,
        queue,
        chosen["state"],
        job=chosen.get("job") or None,
        match=parse_match(chosen.get("match", "")) or None,
        most=COUNT_LIMIT,
    )


def routes(kit: Kit) -> list[Route]:
    app = kit.app

    async def browse_page(request: Request) -> Response:
        queue = check_queue(request.path_params["queue"])
        caps = app.backend.capabilities
        # A backend that cannot list what waits (SQS) opens on what it can list.
        first = "in_flight" if caps.browsing and not caps.browse_waiting else "ready"
        chosen = filters(request, first)
        cursor = request.query_params.get("cursor") or None

        def read() -> tuple[Any, str | None]:
            try:
                page = app.messages(
                    queue,
                    chosen["state"],
                    job=chosen.get("job") or None,
                    match=parse_match(chosen.get("match", "")) or None,
                    newest_first=chosen["order"] == "newest",
                    limit=PAGE,
                    cursor=cursor,
                )
            except Unsupported as exc:
                return None, str(exc)
            return page, None

        page, refused = await run_in_threadpool(read)
        listed = chosen["state"] in ("in_flight", "dead")
        return kit.render(
            request,
            "browse.html",
            queue=queue,
            chosen=chosen,
            states=BROWSE_STATES,
            page=page,
            refused=refused,
            first=cursor is None,
            next_query=urlencode({**chosen, "cursor": page.cursor})
            if page is not None and page.cursor
            else None,
            first_query=urlencode(chosen),
            # Where the backend acts on what it lists: every state, or (SQS) in-flight
            # and dead messages only.
            can_retry=caps.browse_waiting or (caps.browsing and chosen["state"] == "dead"),
            can_cancel=caps.cancel and (caps.browse_waiting or (caps.browsing and listed)),
        )

    async def bulk_confirm(request: Request) -> Response:
        queue = check_queue(request.path_params["queue"])
        action = request.path_params["action"]
        if action not in BULK:
            return PlainTextResponse("unknown action", status_code=404)
        chosen = filters(request)
        chosen.pop("order", None)

        def read() -> tuple[int, bool, str | None]:
            try:
                count, more = count_matching(kit, queue, chosen)
            except Unsupported as exc:
                return 0, False, str(exc)
            return count, more, None

        count, more, refused = await run_in_threadpool(read)
        return kit.render(
            request,
            "bulk.html",
            queue=queue,
            action=action,
            verb=BULK[action],
            chosen=chosen,
            count=count,
            more=more,
            refused=refused,
            back=f"/queues/{quote(queue, safe='')}/browse?{urlencode(chosen)}",
        )

    async def bulk_act(request: Request) -> Response:
        queue = check_queue(request.path_params["queue"])
        action = request.path_params["action"]
        if action not in BULK:
            return PlainTextResponse("unknown action", status_code=404)
        fields = await kit.form(request)
        if not kit.csrf_ok(request, fields):
            return PlainTextResponse("missing or wrong CSRF token", status_code=403)
        state = check_state(fields.get("state", ""))
        job = fields.get("job", "").strip() or None
        match = parse_match(fields.get("match", "")) or None
        chosen = {"state": state, "job": job or "", "match": fields.get("match", "").strip()}
        back = f"/queues/{quote(queue, safe='')}/browse?"
        if fields.get("confirm") != "yes":
            return RedirectResponse(
                f"/queues/{quote(queue, safe='')}/bulk/{action}?"
                + urlencode({k: v for k, v in chosen.items() if v}),
                status_code=303,
            )

        def run() -> str:
            if action == "retry":
                return (
                    f"retried {app.retry_matching(queue, state, job=job, match=match)} message(s)"
                )
            return f"cancelled {app.cancel_matching(queue, state, job=job, match=match)} message(s)"

        done = await run_in_threadpool(run)
        query = {k: v for k, v in chosen.items() if v}
        return RedirectResponse(back + urlencode({**query, "done": done}), status_code=303)

    return [
        Route("/queues/{queue}/browse", browse_page),
        Route("/queues/{queue}/bulk/{action}", bulk_confirm, methods=["GET"]),
        Route("/queues/{queue}/bulk/{action}", bulk_act, methods=["POST"]),
    ]
