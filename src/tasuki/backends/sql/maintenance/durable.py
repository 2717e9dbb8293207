"""Drop the durable step records, signals and waits of messages that are gone (acked
and past their result's time, purged, cancelled, dead letters purged): they are written
beside a message, and dropped here rather than on the ack, which stays one statement."""

from __future__ import annotations

from tasuki.backends.sql.maintenance.service import SQLService


class DurableCleaner(SQLService):
    name = "durable"
    steps = ("steps_forget_orphans", "signals_forget_orphans", "waits_forget_orphans")
