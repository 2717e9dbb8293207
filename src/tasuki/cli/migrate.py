"""`tasuki migrate --url postgresql://...`: bring a backend's schema up to date."""

from __future__ import annotations

import click

from tasuki.backends.urls import scheme_of
from tasuki.cli.common import console, friendly_errors
from tasuki.errors import InvalidURL


@click.command()
@click.option("--url", envvar="TASUKI_URL", required=True, help="Backend URL ($TASUKI_URL).")
@friendly_errors
def migrate(url: str) -> None:
    """Apply the schema migrations a PostgreSQL backend lacks (safe to run concurrently)."""
    scheme = scheme_of(url)
    if scheme not in ("postgresql", "postgres"):
        if scheme == "sqlite":
            console.print("SQLite creates its schema when it opens the file: nothing to do.")
            return
        raise InvalidURL(f"{scheme}:// has no schema to migrate")
    from tasuki.backends.postgres import from_url
    from tasuki.backends.postgres.backend import split_options

    base, _ = split_options(url, {"migrate"})
    joiner = "&" if "?" in base else "?"
    backend = from_url(f"{base}{joiner}migrate=false")
    try:
        applied = backend.migrate()
    finally:
        backend.close()
    if applied:
        console.print(f"applied {len(applied)} migration(s) to {backend.url}: {', '.join(applied)}")
    else:
        console.print(f"{backend.url} is up to date")
