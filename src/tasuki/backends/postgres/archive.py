"""Prune the archive of acked messages (`?archive=true`): rows older than `archive_days`.

A maintenance service (run by the workers, once per interval across all of them),
deleting at most `BATCH` rows per statement, workers pruning at once skipping each
other's rows; while older rows remain it runs again every second, so it removes about
10,000 rows a second at most.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tasuki.backends.sql.dialect import Dialect
from tasuki.backends.sql.maintenance.service import BATCH, EVERY, SQLService


class ArchivePruner(SQLService):
    name = "archive"
    steps = ("prune_archive",)

    def __init__(
        self,
        dialect: Dialect,
        clock: Callable[[], float],
        keep: float,
        *,
        interval: float = EVERY,
        limit: int = BATCH,
    ) -> None:
        super().__init__(dialect, clock, interval=interval, limit=limit)
        self.keep = keep  # seconds an archived row is kept

    def params(self, now: float) -> dict[str, Any]:
        return {"before": now - self.keep, "limit": self.limit}
