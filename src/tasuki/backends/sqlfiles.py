"""Load named SQL blocks from the `.sql` files that sit beside a backend.

A file holds blocks that start with `-- name: <query_name>`; the text up to the next
header is the query. Keeping SQL in files keeps it readable and lintable, and lets a test
check that SQLite and PostgreSQL define the same set of operations.
"""

from __future__ import annotations

import re
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


def load_queries(package: str, filename: str) -> dict[str, str]:
    return parse_queries(resources.files(package).joinpath(filename).read_text("utf-8"))
