"""The statements of SQLite's limits find their rows by index: a lease or a settle of
limited messages never walks a queue's waiting messages, however many are parked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tasuki.backends.sqlite import SQLiteBackend
from tasuki.backends.sqlite.dialect import Q

PARAMS = {
    "queue": "q",
    "ids": "[]",
    "untils": "[]",
    "keys": "[]",
    "queues": "[]",
    "tokens": "[]",
    "pers": "[]",
    "rows": "[]",
    "now": 0.0,
    "nonce": "x",
    "visibility_timeout": 30.0,
    "key": "k",
    "n": 1,
    "scan": 256,
}
# Every statement of admission and wake-up (the clean-ups of `LimitsCleaner` scan the
# small tables of slots and starts on purpose, a batch at a time).
HOT = [
    "limit_due",
    "limit_candidates",
    "limit_lease",
    "limit_park",
    "slot_holders",
    "slots_prune",
    "slot_take",
    "slots_free",
    "limit_parked_keys",
    "limit_wake",
    "rate_window",
    "rate_take",
    "rate_prune",
]


@pytest.mark.parametrize("name", HOT)
def test_each_statement_seeks_by_index(tmp_path: Path, name: str) -> None:
    backend = SQLiteBackend(str(tmp_path / "plan.db"))
    conn = backend.sqlite.conn()
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + Q[name], PARAMS)]
    for step in plan:
        # No table scanned whole: json_each's lists are the parameters, `p` the
        # materialized list of parked messages, both small.
        assert not re.match(r"SCAN (?!\w+ VIRTUAL TABLE|json_each|p$)", step), plan
        assert "tasuki_messages_state" not in step, plan  # a range of a queue's waiting
    backend.close()
