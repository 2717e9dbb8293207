"""Load named SQL blocks from the `.sql` files that sit beside a backend.

A file holds blocks that start with `-- name: <query_name>`; the text up to the next
header is the query. Keeping SQL in files keeps it readable and lintable, and lets a test
check that SQLite and PostgreSQL define the same set of operations.

Given the set of names a backend needs (`required`), loading also checks the file
against it: a missing block or an unknown name (a typo) fails when the backend's module
is imported, not when the query is first run.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from importlib import resources

_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, str]:
    """Map each block's name to its SQL, without comments-only lines at the edges."""
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        lines = [line for line in body.strip().splitlines() if not line.lstrip().startswith("--")]
        sql = "\n".join(lines).strip()
        if not sql:
            raise ValueError(f"query {name!r} is empty")
        queries[name] = sql
    return queries


class QueryNamesError(ValueError):
    """A `.sql` file does not define exactly the queries its backend needs."""


def check_names(queries: Mapping[str, str], required: Collection[str], source: str) -> None:
    missing = sorted(set(required) - queries.keys())
    unknown = sorted(queries.keys() - set(required))
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if unknown:
            parts.append(f"unknown {', '.join(unknown)}")
        raise QueryNamesError(f"{source}: {'; '.join(parts)}")


def load_queries(
    package: str, filename: str, required: Collection[str] | None = None
) -> dict[str, str]:
    """The named blocks of `package/filename`, checked against `required` when given."""
    queries = parse_queries(resources.files(package).joinpath(filename).read_text("utf-8"))
    if required is not None:
        check_names(queries, required, f"{package}/{filename}")
    return queries
