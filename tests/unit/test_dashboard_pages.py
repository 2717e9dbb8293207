"""The console pages' pure parts: the argument filter's text, and the per-interval
outcome counts a job's chart draws from totals over growing windows."""

from __future__ import annotations

import pytest

from tasuki.core.console import JobStats
from tasuki.errors import InvalidArgument
from tasuki.web.pages.jobs import series
from tasuki.web.pages.kit import parse_match


def test_a_match_reads_json_values_and_keeps_text() -> None:
    assert parse_match('amount=5, customer=acme, 0="7", ok=true') == {
        "amount": 5,
        "customer": "acme",
        "0": "7",
        "ok": True,
    }
    assert parse_match("  ") == {}
    with pytest.raises(InvalidArgument):
        parse_match("amount")
    with pytest.raises(InvalidArgument):
        parse_match("=5")


def test_series_are_the_differences_of_growing_windows_oldest_first() -> None:
    # No run in the last two intervals (no stats at all for the job there).
    assert series([None, None, JobStats(succeeded=3)])["succeeded"] == [3, 0, 0]
    # Totals over the last 1, 2 and 3 intervals: 4 now, 0 the interval before, 6 before.
    totals = [JobStats(succeeded=4), JobStats(succeeded=4), JobStats(succeeded=10, dead=2)]
    points = series(totals)
    assert points["succeeded"] == [6, 0, 4]
    assert points["dead"] == [2, 0, 0]
    assert points["failed"] == [0, 0, 0]
