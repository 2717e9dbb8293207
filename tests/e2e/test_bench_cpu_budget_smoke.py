"""CI's smoke run of `benchmarks.cpu_budget`: one tasuki worker drains a few CPU-bound and
no-op jobs and the figures it prints are there and add up (no rate is asserted), and the
bare loop runs in two processes. The peers' sides need the benchmark venv and are run by
hand (docs/benchmarks/shapes.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tasuki.testing.servers import RedisServer

ROOT = Path(__file__).resolve().parents[2]


def budget(*args: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.cpu_budget", *args],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    found: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.parametrize("job", ["noop", "cpu"])
def test_a_tasuki_worker_drains_and_reports_per_job(redis_server: RedisServer, job: str) -> None:
    got = budget(
        "run", "--redis", redis_server.url(), "--system", "tasuki", "--job", job,
        "--jobs", "60", "-c", "4", "--spin", "2000",
    )  # fmt: skip
    assert got["jobs"] == 60 and got["system"] == "tasuki"
    assert isinstance(got["cpu_ms"], float) and got["cpu_ms"] > 0
    assert got["cpu_ms"] == pytest.approx(got["user_ms"] + got["sys_ms"], abs=1e-3)
    if job == "cpu":  # the job's own CPU is part of the process's
        assert 0 < got["job_cpu_ms"] <= got["cpu_ms"] + 1e-3


def test_the_bare_loop_runs_in_two_processes() -> None:
    got = budget("spin", "--spin", "1000", "--reps", "5", "--procs", "2")
    assert got["procs"] == 2
    assert isinstance(got["cpu_us"], list) and len(got["cpu_us"]) == 2
