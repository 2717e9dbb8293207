"""Forget the rows of limits nothing reads any more: slot rows whose lease is over, and
rate-limit starts out of their window.

Admission already ignores both (a slot holds only while its lease is live; a start
counts only inside its window) and prunes those of the keys it counts; this gives back
the rows of keys no message has asked for since.
"""

from __future__ import annotations

from tasuki.backends.sql.maintenance.service import SQLService


class LimitsCleaner(SQLService):
    name = "limits"
    steps = ("slots_forget_dead", "rate_forget_expired")
