"""CI's smoke benchmark: the real-shape harness drains every shape on tasuki and the raw
floor end to end, on its own redis-server, and its counts add up.

What it guards is the harness, not a rate: a benchmark that no longer runs is found here,
not on the day its figures are wanted. Rates are published from runs by hand
(docs/benchmarks/shapes.md), never asserted in a test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    not any(
        (Path(d) / "redis-server").exists() for d in os.environ.get("PATH", "").split(os.pathsep)
    ),
    reason="the harness starts its own redis-server",
)


SMOKE = [
    sys.executable, "-m", "benchmarks.shapes", "--quick", "--only", "tasuki,raw", "--no-ideal",
    "--shapes", "redis,sleep,cpu,io50",
]  # fmt: skip


def test_every_shape_drains_on_tasuki_and_the_floor(tmp_path: Path) -> None:
    out = subprocess.run(
        [*SMOKE, "--out", str(tmp_path)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    ran = {(r["system"], r["shape"]) for r in rows}
    assert ran == {
        ("tasuki", "redis"),
        ("tasuki", "sleep"),
        ("tasuki", "cpu"),
        ("tasuki", "io50"),
        ("raw", "redis"),
    }
    for r in rows:
        assert "error" not in r, r
        assert r["duplicates"] == 0, r
        assert r["steady_per_s"] > 0, r
        if r["shape"] == "redis":  # the jobs' own INCRs: every job ran, once
            assert r["counted"] == r["drained"], r
        if r["shape"] == "io50":  # a share of its ideal, processes x c / 50 ms
            assert r["ideal_per_s"] == 1 * 1024 / 0.05, r
    table = (tmp_path / "latest.md").read_text()
    assert "best configuration" in table and "raw floor" in table
    assert "every configuration against the ideal" in table


#: shape io50's peers, each in its `--quick` configuration, where its package is installed
#: (the bench venv, `./dev bench shapes`; not CI's)
PEERS = {
    "celery": "celery",
    "dramatiq": "dramatiq",
    "huey": "huey",
    "arq": "arq",
    "saq": "saq",
    "taskiq": "taskiq_redis",
}


@pytest.mark.parametrize("system", sorted(PEERS))
def test_the_io_shape_drains_on_each_installed_peer(tmp_path: Path, system: str) -> None:
    import importlib.util

    if importlib.util.find_spec(PEERS[system]) is None:
        pytest.skip(f"{system} is not installed here (it is in .venv-bench)")
    argv = [sys.executable, "-m", "benchmarks.shapes", "--quick", "--only", system]
    out = subprocess.run(
        [*argv, "--shapes", "io50", "--out", str(tmp_path)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    (r,) = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert "error" not in r, r
    assert (r["system"], r["shape"], r["duplicates"]) == (system, "io50", 0), r
    assert r["pool"] > 256, r  # its own pool size, above redis-py's default of 100
