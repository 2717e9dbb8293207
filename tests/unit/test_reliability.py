"""The reliability meters' arithmetic, and the Lua copy of the expiry-to-start buckets."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from tasuki.core import reliability
from tasuki.core.reliability import LAG_BOUNDS, METERS, RECOVERY_BOUNDS, Reliability
from tasuki.middleware import metrics


def test_the_buckets_are_the_prometheus_middlewares() -> None:
    assert (*LAG_BOUNDS, float("inf")) == metrics.LAG_BUCKETS
    assert (*RECOVERY_BOUNDS, float("inf")) == metrics.RECOVERY_BUCKETS


def test_the_lua_bounds_are_the_same_in_microseconds() -> None:
    lua = (
        resources.files("tasuki.backends.redis")
        .joinpath("lua", "includes", "meters.lua")
        .read_text("utf-8")
    )
    found = re.search(r"RECOVERY_BOUNDS_US = \{([^}]*)\}", lua)
    assert found is not None
    bounds = [int(v) for v in re.split(r"[,\s]+", found.group(1).strip()) if v]
    assert bounds == [round(b * 1e6) for b in RECOVERY_BOUNDS]


@pytest.mark.parametrize(
    ("seconds", "bucket"),
    [(0.0, 0), (-1.0, 0), (0.05, 0), (0.050001, 1), (1.0, 4), (300.0, 10), (300.5, 11)],
)
def test_an_observation_lands_in_the_first_bucket_that_holds_it(
    seconds: float, bucket: int
) -> None:
    meters: dict[str, int] = {}
    reliability.observe(meters, reliability.RECOVERY, seconds)
    assert meters == {"recovery_us": max(0, round(seconds * 1e6)), f"recovery_b{bucket}": 1}
    assert set(meters) <= METERS


def test_from_meters_mean_and_quantiles() -> None:
    meters: dict[str, int] = {"redeliveries": 4, "leases_lost": 2}
    for lag in (0.001, 0.002, 0.2, 0.3, 12.0):
        reliability.observe(meters, reliability.LAG, lag)
    r = Reliability.from_meters(meters)
    assert (r.redeliveries, r.leases_lost, r.expiry_to_start.count) == (4, 2, 0)
    lag = r.heartbeat_lag
    assert lag.count == 5
    assert lag.mean == pytest.approx(12.503 / 5)
    assert lag.quantile(0.4) == 0.005
    assert lag.quantile(0.6) == 0.25
    assert lag.quantile(0.8) == 0.5
    assert lag.quantile(0.99) == float("inf")
    assert lag.buckets()[0] == ("≤ 0.005s", 2)
    assert lag.buckets()[-1] == ("> 10s", 1)
    assert r.as_dict()["heartbeat_lag"] == {
        "count": 5,
        "seconds": pytest.approx(12.503),
        "buckets": {
            **{f"{b:g}": 0 for b in LAG_BOUNDS},
            "0.005": 2,
            "0.25": 1,
            "0.5": 1,
            "+Inf": 1,
        },
    }
