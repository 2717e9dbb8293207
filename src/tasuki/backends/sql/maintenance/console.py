"""Forget workers not seen for a day (`WORKER_KEPT`) and per-minute job stats older than
they are kept (`STATS_KEPT`): the registry and the rollups stay bounded."""

from __future__ import annotations

from tasuki.backends.sql.maintenance.service import SQLService


class ConsoleCleaner(SQLService):
    name = "console"
    steps = ("workers_forget", "job_stats_forget")
