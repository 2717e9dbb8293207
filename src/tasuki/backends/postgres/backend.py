"""`postgresql://user:pass@host:port/db?schema=tasuki` — many machines, one database.

The lifecycle is the shared SQL layer's (`tasuki.backends.sql`); PostgreSQL plugs in
as a dialect (`dialect.py`: a connection pool, transactions, LISTEN/NOTIFY wake-ups in
`listener.py`, and `queries.sql`). This module reads the URL's options and sets them up.

- **Leasing** selects due rows `FOR UPDATE SKIP LOCKED` in batches, so concurrent
  leasers never wait on each other's rows, then buries the exhausted ones and leases the
  rest in the same statement. Expired leases are found by the same index walk (a lease
  in flight is "visible" again once `visible_at` passes): there is no sweeper to die.
- **Locks** live in a table with an expiry column, not in advisory locks: a lock must
  outlive the session that took it (a worker's lock is renewed over many connections
  from the pool, and a unique claim is taken by the producer's enqueue and released by
  the worker), must have a TTL, and must be taken atomically with the enqueue's insert —
  session advisory locks have none of the three.
- **Schema**: versioned migrations (`schema.py`), applied on first use unless
  `?migrate=false`, or by `tasuki migrate --url ...`. Like Redis's, the backend connects
  when first used, not when created: a worker can start while the server is down.
- **Time**: `now` comes from the client's clock, like SQLite's; hosts sharing a database
  must keep their clocks in sync (NTP), as they must for any delay to mean the same.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg

from tasuki.backends.postgres.archive import ArchivePruner
from tasuki.backends.postgres.dialect import GIL_SLICE, PostgresDialect
from tasuki.backends.postgres.listener import FALLBACK_POLL
from tasuki.backends.postgres.schema import migrate
from tasuki.backends.sql.backend import SQLBackend
from tasuki.backends.urls import redact
from tasuki.errors import BackendError, InvalidURL

DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

log = logging.getLogger("tasuki.postgres")
# URL options read by tasuki; any other (sslmode, connect_timeout ...) goes to libpq.
OPTIONS = {
    "schema",
    "migrate",
    "pool_size",
    "max_message_size",
    "pgbouncer",
    "listen_url",
    "archive",
    "archive_days",
}


class PostgresBackend(SQLBackend):
    gil_slice = GIL_SLICE

    def __init__(
        self,
        url: str,
        *,
        schema: str = "tasuki",
        migrate: bool = True,
        pool_size: int = 8,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        pgbouncer: bool = False,
        listen_url: str | None = None,
        archive: bool = False,
        archive_days: float = 7.0,
    ) -> None:
        if not _SCHEMA_NAME.match(schema):
            raise InvalidURL(f"bad schema name {schema!r}: lower-case letters, digits and _")
        if archive_days < 0:
            raise InvalidURL(f"archive_days must be 0 (keep forever) or more, not {archive_days}")
        conninfo, _ = split_options(url, OPTIONS)
        conninfo = urlunsplit(urlsplit(conninfo)._replace(scheme="postgresql"))
        self.schema = schema
        self.postgres = PostgresDialect(
            conninfo,
            schema=schema,
            pool_size=pool_size,
            max_message_size=max_message_size,
            display_url=redact(url),
            pgbouncer=pgbouncer,
            listen_conninfo=listen_url,
            archive=archive,
        )
        if self.postgres.polls_only:
            log.info(
                "%s: behind pgBouncer without listen_url: waiting workers poll every %.2fs",
                redact(url),
                FALLBACK_POLL,
            )
        super().__init__(redact(url), self.postgres)
        if archive and archive_days > 0:
            self.services.append(ArchivePruner(self.postgres, self._now, archive_days * 86_400.0))
        if migrate:  # on first use, so a worker can start while the server is down
            self.postgres.first_use = self.migrate

    def migrate(self) -> list[str]:
        """Apply the migrations this schema lacks; returns their names."""
        with self.postgres.connect() as conn:
            try:
                return migrate(conn, self.schema)
            except psycopg.Error as exc:
                raise BackendError(f"migrating {self.url} failed: {exc}") from exc


def split_options(url: str, names: set[str]) -> tuple[str, str]:
    """(URL without tasuki's options, tasuki's options as a query string)."""
    parts = urlsplit(url)
    ours: list[tuple[str, str]] = []
    theirs: list[tuple[str, str]] = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        (ours if name in names else theirs).append((name, value))
    rest: str = urlunsplit(parts._replace(query=urlencode(theirs)))
    return rest, urlencode(ours)
