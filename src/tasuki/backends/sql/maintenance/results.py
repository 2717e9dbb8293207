"""Forget result records past their time (`keep_result`).

Every read already ignores them once `expires_at` has passed; this gives their rows back.
"""

from __future__ import annotations

from tasuki.backends.sql.maintenance.service import SQLService


class ResultsCleaner(SQLService):
    name = "results"
    steps = ("results_forget_expired",)
