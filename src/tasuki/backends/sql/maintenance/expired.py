"""Forget finished ids whose window has passed, and locks past their expiry.

Both are already ignored by every read once their time is past (`expires_at > now`);
this only gives their rows back.
"""

from __future__ import annotations

from tasuki.backends.sql.maintenance.service import SQLService


class ExpiredCleaner(SQLService):
    name = "expired"
    steps = ("forget_expired", "locks_forget_expired")
