"""Forget flows, their barriers and their slots past their time (`FlowRecord.retention`,
`Effects.ttl`).

Every read already ignores them once `expires_at` has passed; this gives their rows back.
"""

from __future__ import annotations

from tasuki.backends.sql.maintenance.service import SQLService


class FlowsCleaner(SQLService):
    name = "flows"
    steps = ("flow_slots_forget_expired", "flow_barriers_forget_expired", "flows_forget_expired")
