"""A maintenance service made of the dialect's named queries, run in short transactions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tasuki.backends.base import MaintenanceService
from tasuki.backends.sql.dialect import Dialect, Extra, QueryName

# The most rows one statement of a service deletes: a short write, so that workers
# sharing the store (on SQLite: its one writer at a time) never wait long behind it.
BATCH = 10_000
# Seconds between two rounds of a service.
EVERY = 30.0


class SQLService(MaintenanceService):
    """Runs its `steps`, one write transaction each, with `now` and `limit`; a step that
    deleted `limit` rows has more to do."""

    steps: tuple[QueryName | Extra, ...]

    def __init__(
        self,
        dialect: Dialect,
        clock: Callable[[], float],
        *,
        interval: float = EVERY,
        limit: int = BATCH,
    ) -> None:
        self.dialect = dialect
        self.clock = clock
        self.interval = interval
        self.limit = limit

    def params(self, now: float) -> dict[str, Any]:
        return {"now": now, "limit": self.limit}

    def run(self) -> bool:
        more = False
        for step in self.steps:
            with self.dialect.write() as conn:
                deleted = conn.execute(self.dialect.queries[step], self.params(self.clock()))
                more |= deleted.rowcount >= self.limit
        return more
