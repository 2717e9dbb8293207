"""`sqlite:///path.db` — the embedded default: one file, many processes, zero setup.

Safety across processes comes from SQLite itself: WAL so readers never block the
writer, a busy timeout so writers queue instead of failing, and short `BEGIN IMMEDIATE`
transactions so a lease is decided by exactly one writer at a time. The lease walks a
partial index ordered by visibility, so it stays O(log n) whatever the backlog.

There is no cross-process notification in SQLite, so an idle `lease(wait=...)` polls
`PRAGMA data_version` — a counter that changes when another connection commits, read
from shared memory without touching the database pages — backing off from 1 ms to
`poll_interval` (20 ms). Commits from the same process wake waiters at once.

The lifecycle itself is the shared SQL layer's (`tasuki.backends.sql`); SQLite brings
its dialect (`dialect.py`: connections, transactions, wake-ups, the named queries) and
its schema (`schema.py`). This module checks the options and joins them.
"""

from __future__ import annotations

import os

from tasuki.backends.sql.backend import SQLBackend
from tasuki.backends.sqlite.dialect import SQLiteDialect
from tasuki.backends.sqlite.files import create_private
from tasuki.errors import BackendUnavailable, InvalidURL

DEFAULT_MAX_MESSAGE_SIZE = 1024 * 1024
SYNCHRONOUS = ("off", "normal", "full", "extra")


class SQLiteBackend(SQLBackend):
    def __init__(
        self,
        path: str,
        *,
        synchronous: str = "full",
        busy_timeout: float = 30.0,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        poll_interval: float = 0.02,
        create: bool = True,
    ) -> None:
        if path in ("", ":memory:") or path.startswith("file::memory:"):
            raise InvalidURL(
                "sqlite needs a file that every worker process can open; "
                "use memory:// for an in-process store"
            )
        if synchronous not in SYNCHRONOUS:
            raise InvalidURL(
                f"sqlite synchronous must be one of {SYNCHRONOUS}, got {synchronous!r}"
            )
        if not create and not os.path.isfile(path):
            raise BackendUnavailable(
                f"no SQLite database at {path!r} (from {os.getcwd()!r}): "
                "check the URL, $TASUKI_URL or the working directory"
            )
        self.path = path
        if create:
            create_private(path)
        self.sqlite = SQLiteDialect(
            path,
            synchronous=synchronous,
            busy_timeout=busy_timeout,
            max_message_size=max_message_size,
            poll_interval=poll_interval,
        )
        super().__init__(f"sqlite:///{path}", self.sqlite)
        self.sqlite.conn()  # open now: a path that can't be opened fails at construction
