"""The headers every dashboard response carries, errors included.

An error page is a page too: a 404 that echoes a path, or a 500, must not be framed,
sniffed into a script or cached any more than a queue's page. `SecurityHeaders` wraps
the whole application, so the gate's refusals and the router's 404s get them; the 500
that Starlette's outermost layer sends for an unexpected exception is built by
`server_error`, with the same headers.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
}


class SecurityHeaders:
    """ASGI middleware: `SECURITY_HEADERS` on every response that lacks them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def server_error(request: Request, exc: Exception) -> Response:
    """The 500 of an unexpected exception: a plain line and the headers. The details go
    to the server's log (Starlette raises the exception on to it), never to the page."""
    return PlainTextResponse(
        "internal error: see the dashboard's log", status_code=500, headers=SECURITY_HEADERS
    )
