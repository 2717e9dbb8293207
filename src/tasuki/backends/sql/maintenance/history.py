"""Forget the history of messages that are gone (acked, purged), unless their id is still
remembered as finished: `inspect` shows a finished message's history for its window.

A message's history is bounded as it is written (`HISTORY_LIMIT` entries); this takes
away what is left of messages no longer there.
"""

from __future__ import annotations

from tasuki.backends.sql.maintenance.service import SQLService


class HistoryCleaner(SQLService):
    name = "history"
    steps = ("forget_history",)
