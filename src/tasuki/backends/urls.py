"""The one place where a URL scheme becomes a backend.

Backends other than memory and SQLite are imported only when their scheme is used, so
the core install doesn't need redis-py, psycopg or boto3.

A scheme whose module is not part of the install is *planned*: asking for it says so,
instead of suggesting an install that cannot help. A missing driver makes the error name
the extra to install (`pip install 'tasuki[postgres]'`).

A backend from another package names its scheme in the `tasuki.backends` entry-point
group, so `App("mine://...")`, `--url mine://...` and a worker in another process all
reach it:

    [project.entry-points."tasuki.backends"]
    mine = "mypackage.backend:from_url"    # from_url(url) -> Backend

The schemes of this package come first: an entry point cannot take one of them over.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
from collections.abc import Callable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tasuki.backends.base import Backend
from tasuki.errors import InvalidURL

DEFAULT_URL = "sqlite:///tasuki.db"
ENTRY_POINTS = "tasuki.backends"

# scheme -> (module, factory function name, pip extra that brings the module's dependencies)
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
# a URL inside an option: ...&locks=redis://user:PASSWORD@host
_NESTED_PASSWORD = re.compile(r"(=[a-z][a-z0-9+.-]*://[^/?#@:&]*:)[^/?#@&]*@", re.IGNORECASE)
_SECRET_NAME = re.compile(r"pass|secret|token|key", re.IGNORECASE)
_SECRET_OPTION = re.compile(
    r"([?&][a-z_]*(?:pass|secret|token|key)[a-z_]*=)[^&#]*",
    re.IGNORECASE,
)


def redact(url: str) -> str:
    """The URL with every password replaced by `***`: its own, those of URLs in its
    options (`locks=redis://:pw@...`, `listen_url=`), and secret-looking options
    (`password=`, `...token=`, `...secret...=`, `...key...=`). What logs, errors, the
    CLI, the dashboard and `repr` show; works on URLs too broken to parse."""
    if not isinstance(url, str):
        return repr(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # too broken to parse: the patterns still find the secrets
        url = _USERINFO_PASSWORD.sub(r"\1***@", url, count=1)
        url = _NESTED_PASSWORD.sub(r"\1***@", url)
        return _SECRET_OPTION.sub(r"\1***", url)
    original = parts
    if parts.query:
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        query = [
            (name, "***" if _SECRET_NAME.search(name) else redact(v) if "://" in v else v)
            for name, v in pairs
        ]
        if query != pairs:
            parts = parts._replace(query=urlencode(query, safe=":/@*[]"))
    if parts.password is not None:
        user = parts.username or ""
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        parts = parts._replace(netloc=f"{user}:***@{host}" + (f":{port}" if port else ""))
    if parts == original:
        return url
    shown: str = urlunsplit(parts)
    if not parts.netloc and url.startswith(f"{parts.scheme}://"):  # sqlite:///path
        shown = f"{parts.scheme}://{shown[len(parts.scheme) + 1 :]}"
    return shown


def scheme_of(url: str) -> str:
    if not isinstance(url, str) or "://" not in url:
        raise InvalidURL(
            f"invalid backend URL {redact(url)!r}: expected scheme://..., e.g. {DEFAULT_URL!r}, "
            "'memory://' or 'redis://localhost:6379/0'"
        )
    return url.split("://", 1)[0].lower()


def _built(module_name: str) -> bool:
    """Whether the package holds this backend module (its dependencies may still be missing)."""
    try:
        return importlib.util.find_spec(module_name) is not None
    except ImportError:  # a parent package that is itself missing
        return False


def planned_schemes() -> list[str]:
    """Schemes with a place in the design whose backend is not in this package yet."""
    return sorted(s for s, (module, _, _) in _SCHEMES.items() if not _built(module))


def _installed(scheme: str | None = None) -> list[importlib.metadata.EntryPoint]:
    """Backends of other packages: every one, or those claiming `scheme`."""
    found = importlib.metadata.entry_points(group=ENTRY_POINTS)
    unique = {ep.value: ep for ep in found if scheme is None or ep.name == scheme}
    return list(unique.values())


def _known() -> list[str]:
    planned = planned_schemes()
    own = {s for s in _SCHEMES if s not in planned}
    return sorted(own | {ep.name for ep in _installed()})


def _check_splits(url: str) -> None:
    try:
        urlsplit(url)  # every factory splits it again: make that safe once, here
    except ValueError as exc:
        raise InvalidURL(f"invalid backend URL {redact(url)!r}: {exc}") from exc


def _module(url: str) -> tuple[object, str]:
    scheme = scheme_of(url)
    entry = _SCHEMES.get(scheme)
    if entry is None:
        return _installed_module(url, scheme)
    _check_splits(url)
    module_name, factory_name, extra = entry
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if not _built(module_name):
            raise InvalidURL(
                f"the {scheme}:// backend is planned, not part of tasuki yet; "
                f"the backends of today: {', '.join(f'{s}://' for s in _known())}"
            ) from None
        hint = f"pip install 'tasuki[{extra}]'" if extra else "reinstall tasuki"
        raise InvalidURL(f"the {scheme}:// backend is not available ({exc}); {hint}") from exc
    return module, factory_name


def _installed_module(url: str, scheme: str) -> tuple[object, str]:
    """The module of the backend another package declares for `scheme`."""
    claims = _installed(scheme)
    if not claims:
        planned = planned_schemes()
        later = f"; planned: {', '.join(planned)}" if planned else ""
        raise InvalidURL(
            f"unsupported backend URL scheme {scheme!r} in {redact(url)!r}; "
            f"known: {', '.join(_known())}{later}"
        )
    if len(claims) > 1:
        raise InvalidURL(
            f"several installed packages declare the {scheme}:// backend "
            f"({', '.join(ep.value for ep in claims)}); uninstall all but one"
        )
    _check_splits(url)
    [ep] = claims
    try:
        module = importlib.import_module(ep.module)
    except ImportError as exc:
        raise InvalidURL(
            f"the {scheme}:// backend ({ep.value}, entry point of group {ENTRY_POINTS!r}) "
            f"cannot be imported: {exc}"
        ) from exc
    return module, ep.attr or "from_url"


def backend_from_url(url: str) -> Backend:
    module, factory_name = _module(url)
    factory: Callable[[str], Backend] = getattr(module, factory_name)
    try:
        return factory(url)
    except ValueError as exc:  # a driver's own parser (host names, ports, encodings)
        raise InvalidURL(f"invalid backend URL {redact(url)!r}: {exc}") from exc


def open_existing(url: str) -> Backend:
    """The backend of `url` for reading or cleaning up what it already stores.

    A backend whose store can be created by opening it (an SQLite file) defines
    `open_existing(url)`, which refuses a store that does not exist; for a server the
    store is the server, and opening it creates nothing.
    """
    module, factory_name = _module(url)
    opener: Callable[[str], Backend] = getattr(
        module, "open_existing", getattr(module, factory_name)
    )
    return opener(url)


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
