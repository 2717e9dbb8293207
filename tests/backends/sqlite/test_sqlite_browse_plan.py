"""The console's listings on SQLite: a range of one index each, in the index's order
(no sort of the rows found), whatever the listing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasuki.backends.sqlite import SQLiteBackend
from tasuki.backends.sqlite.dialect import Q

PARAMS = {
    "queue": "q",
    "job": "j",
    "state": 0,
    "lo": 0.0,
    "hi": 1.0,
    "at": 0.0,
    "seq": 0,
    "limit": 51,
}
LISTINGS = {
    "browse_asc": "tasuki_messages_state",
    "browse_desc": "tasuki_messages_state",
    "browse_job_asc": "tasuki_messages_job",
    "browse_job_desc": "tasuki_messages_job",
    "browse_dead_asc": "tasuki_messages_dead",
    "browse_dead_desc": "tasuki_messages_dead",
    "browse_dead_job_asc": "tasuki_messages_job_dead",
    "browse_dead_job_desc": "tasuki_messages_job_dead",
}


@pytest.mark.parametrize(("name", "index"), sorted(LISTINGS.items()))
def test_each_listing_is_a_range_of_its_index(tmp_path: Path, name: str, index: str) -> None:
    backend = SQLiteBackend(str(tmp_path / "plan.db"))
    conn = backend.sqlite.conn()
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + Q[name], PARAMS)]
    assert len(plan) == 1, plan
    assert plan[0].startswith(f"SEARCH tasuki_messages USING INDEX {index} ("), plan
    backend.close()
