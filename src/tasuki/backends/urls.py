"""The one place where a URL scheme becomes a backend.

Backends other than memory and SQLite are imported only when their scheme is used, so
the core install doesn't need redis-py, psycopg or boto3.
"""

from __future__ import annotations

import importlib
import re
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


# scheme://user:PASSWORD@host: up to the netloc's last "@", as urlsplit reads it
_USERINFO_PASSWORD = re.compile(r"^([^:/?#]*://[^/?#@:]*:)[^/?#]*@")
_SECRET_OPTION = re.compile(
    r"([?&](?:password|passwd|pass|secret|token|[a-z_]*secret[a-z_]*|[a-z_]*token[a-z_]*)=)[^&#]*",
    re.IGNORECASE,
)


def redact(url: str) -> str:
    """The URL with its password (and any secret-looking option) replaced by `***`:
    what logs, errors, the CLI and `repr` show. Works on URLs too broken to parse."""
    if not isinstance(url, str):
        return repr(url)
    url = _USERINFO_PASSWORD.sub(r"\1***@", url, count=1)
    return _SECRET_OPTION.sub(r"\1***", url)


def scheme_of(url: str) -> str:
    if not isinstance(url, str) or "://" not in url:
        raise InvalidURL(
            f"invalid backend URL {redact(url)!r}: expected scheme://..., e.g. {DEFAULT_URL!r}, "
            "'memory://' or 'redis://localhost:6379/0'"
        )
    return url.split("://", 1)[0].lower()


def backend_from_url(url: str) -> Backend:
    scheme = scheme_of(url)
    entry = _SCHEMES.get(scheme)
    if entry is None:
        known = ", ".join(sorted(_SCHEMES))
        raise InvalidURL(
            f"unsupported backend URL scheme {scheme!r} in {redact(url)!r}; known: {known}"
        )
    try:
        urlsplit(url)  # every factory splits it again: make that safe once, here
    except ValueError as exc:
        raise InvalidURL(f"invalid backend URL {redact(url)!r}: {exc}") from exc
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
            raise InvalidURL(f"unknown option {name!r} in {redact(url)!r}; known options: {known}")
        try:
            options[name] = convert(raw)
        except (TypeError, ValueError) as exc:
            shown = "***" if redact(f"?{name}=x") != f"?{name}=x" else repr(raw)
            raise InvalidURL(
                f"bad value {shown} for option {name!r} in {redact(url)!r}: {exc}"
            ) from exc
    return options
