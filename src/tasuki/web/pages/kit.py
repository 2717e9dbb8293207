"""What every page module needs from the dashboard: the app, rendering, forms, CSRF."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse

from tasuki.app import App
from tasuki.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class Kit:
    """The dashboard's shared pieces, handed to each page module's `routes`."""

    app: App
    render: Callable[..., HTMLResponse]
    form: Callable[[Request], Awaitable[dict[str, str]]]
    csrf_ok: Callable[[Request, dict[str, str]], bool]


def parse_match(raw: str) -> dict[str, Any]:
    """`k=v, k2=v2` as the filter of `app.messages(match=...)`: each value read as JSON
    when it parses (`amount=5` is the number 5), else kept as text."""
    match: dict[str, Any] = {}
    for raw_part in raw.split(","):
        part = raw_part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise InvalidArgument(f"an argument match is key=value, got {part!r}")
        try:
            match[key.strip()] = orjson.loads(value.strip())
        except orjson.JSONDecodeError:
            match[key.strip()] = value.strip()
    return match
