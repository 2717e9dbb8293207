"""The dashboard's two duration formatters, against literal cells."""

from __future__ import annotations

import pytest

from tasuki.core.reliability import LAG_BOUNDS, RECOVERY_BOUNDS, Histogram
from tasuki.web.formatting import bound, seconds


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        (None, "-"),
        (0.0, "0 ms"),
        (1e-9, "0 ms"),
        (0.0001234, "0.123 ms"),
        (0.0123, "12.3 ms"),
        (0.25, "250 ms"),
        (0.9994, "999 ms"),
        (0.9996, "1 s"),  # was "1e+03 ms"
        (1.0, "1 s"),
        (1.5, "1.5 s"),
        (12.345, "12.3 s"),
        (299.6, "300 s"),
        (999.4, "999 s"),
        (1234.4, "1234 s"),  # was "1.23e+03 s"
        (86400.0, "86400 s"),
    ],
)
def test_seconds(value: float | None, cell: str) -> None:
    assert seconds(value) == cell


def _hist(bounds: tuple[float, ...], counts: list[int]) -> Histogram:
    return Histogram(bounds=bounds, counts=tuple(counts), seconds=0.0)


def test_bound_of_no_observations() -> None:
    assert bound(_hist(RECOVERY_BOUNDS, [0] * 12), 0.95) == "-"


def test_bound_is_the_upper_bound_of_the_quantiles_bucket() -> None:
    # 19 observations at most 50 ms, one between 1 and 2.5 s: p95 is in the first bucket,
    # p99 in the one of the slow observation.
    counts = [19, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]
    assert bound(_hist(RECOVERY_BOUNDS, counts), 0.95) == "≤ 50 ms"
    assert bound(_hist(RECOVERY_BOUNDS, counts), 0.99) == "≤ 2.5 s"
    assert bound(_hist(RECOVERY_BOUNDS, [0] * 10 + [3, 0]), 0.5) == "≤ 300 s"
    assert bound(_hist(LAG_BOUNDS, [1] + [0] * 11), 0.99) == "≤ 5 ms"
    assert bound(_hist(LAG_BOUNDS, [0] * 7 + [2] + [0] * 4), 0.99) == "≤ 1 s"


def test_bound_above_every_bucket() -> None:
    assert bound(_hist(RECOVERY_BOUNDS, [0] * 11 + [1]), 0.95) == "> 300 s"
    assert bound(_hist(LAG_BOUNDS, [5] + [0] * 10 + [1]), 0.99) == "> 10 s"
