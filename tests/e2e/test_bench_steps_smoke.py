"""CI's smoke run of `./dev bench steps`: the harness drains both sides on every backend
it runs here and writes its figures; no rate is asserted (docs/benchmarks/steps.md has
the figures of runs by hand).

DBOS is measured only where the `dbos` package is installed (the bench venv); here the
harness is told to leave it out, so a missing peer never fails the project's suite.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_three_steps_and_plain_jobs_drain_on_memory_sqlite_and_postgresql(
    tmp_path: Path,
) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.durable_steps",
            "--quick",
            "--only",
            "memory,sqlite,postgresql",
            "--json",
            str(tmp_path / "steps.json"),
        ],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    rows = json.loads((tmp_path / "steps.json").read_text())["rows"]
    assert {r["backend"] for r in rows} == {"memory", "sqlite", "postgresql"}
    for r in rows:
        assert r["plain_us"] > 0 and r["three_steps_us"] > 0, r
