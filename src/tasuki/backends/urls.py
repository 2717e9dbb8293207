"""The one place where a URL scheme becomes a backend.

Backends other than memory and SQLite are imported only when their scheme is used, so
the core install doesn't need redis-py, psycopg or boto3.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from urllib.parse import parse_qsl, urlsplit

from tasuki.backends.base import Backend
from tasuki.errors import InvalidURL

DEFAULT_URL = "sqlite:///tasuki.db"

# scheme -> (module, factory function name, pip extra)
_SCHEMES: dict[str, tuple[str, str, str | None]] = {
    "memory": ("tasuki.backends.memory", "from_url", None),
    "sqlite": ("tasuki.backends.sqlite", "from_url", None),
    "redis": ("tasuki.backends.redis", "from_url", "redis"),
    "rediss": ("tasuki.backends.redis", "from_url", "redis"),
    "unix": ("tasuki.backends.redis", "from_url", "redis"),
    "postgresql": ("tasuki.backends.postgres", "from_url", "postgres"),
    "postgres": ("tasuki.backends.postgres", "from_url", "postgres"),
    "sqs": ("tasuki.backends.sqs", "from_url", "sqs"),
}


def scheme_of(url: str) -> str:
    if not isinstance(url, str) or "://" not in url:
        raise InvalidURL(
            f"invalid backend URL {url!r}: expected scheme://..., e.g. {DEFAULT_URL!r}, "
            "'memory://' or 'redis://localhost:6379/0'"
        )
    return url.split("://", 1)[0].lower()


def backend_from_url(url: str) -> Backend:
    scheme = scheme_of(url)
    entry = _SCHEMES.get(scheme)
    if entry is None:
        known = ", ".join(sorted(_SCHEMES))
        raise InvalidURL(f"unsupported backend URL scheme {scheme!r} in {url!r}; known: {known}")
    try:
        urlsplit(url)  # every factory splits it again: make that safe once, here
    except ValueError as exc:
        raise InvalidURL(f"invalid backend URL {url!r}: {exc}") from exc
    module_name, factory_name, extra = entry
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = f"pip install 'tasuki[{extra}]'" if extra else "reinstall tasuki"
        raise InvalidURL(f"the {scheme}:// backend is not available ({exc}); {hint}") from exc
    factory: Callable[[str], Backend] = getattr(module, factory_name)
    return factory(url)


def query_options(url: str, allowed: dict[str, Callable[[str], object]]) -> dict[str, object]:
    """Parse `?a=1&b=x` against the options a backend accepts; unknown ones are an error."""
    parts = urlsplit(url)
    options: dict[str, object] = {}
    for name, raw in parse_qsl(parts.query, keep_blank_values=True):
        convert = allowed.get(name)
        if convert is None:
            known = ", ".join(sorted(allowed)) or "none"
            raise InvalidURL(f"unknown option {name!r} in {url!r}; known options: {known}")
        try:
            options[name] = convert(raw)
        except (TypeError, ValueError) as exc:
            raise InvalidURL(f"bad value {raw!r} for option {name!r} in {url!r}: {exc}") from exc
    return options
