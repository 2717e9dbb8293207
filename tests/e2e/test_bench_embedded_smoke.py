"""CI's smoke run of `./dev bench embedded`: tasuki on SQLite drains both job shapes end
to end, and so does each embedded peer installed in the interpreter running the tests
(the peers live in the bench venv; a missing one is left out, never a failure). No rate
is asserted: docs/benchmarks/embedded.md has the figures of runs by hand.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEERS = {"huey": "huey", "persist-queue": "persistqueue", "litequeue": "litequeue"}


def test_every_installed_embedded_queue_drains_both_shapes(tmp_path: Path) -> None:
    systems = ["tasuki"] + [s for s, mod in PEERS.items() if importlib.util.find_spec(mod)]
    argv = [sys.executable, "-m", "benchmarks.embedded", "--quick", "--only", ",".join(systems),
            "--messages", "200", "--out", str(tmp_path)]  # fmt: skip
    out = subprocess.run(
        argv,
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    data = json.loads((tmp_path / "results.json").read_text())
    ran = {(r["system"], r["shape"]) for r in data["rows"]}
    assert ran == {(s, shape) for s in systems for shape in ("noop", "io")}
    for r in data["rows"]:
        assert "error" not in r, r
        assert r["drained"] == 200 and r["duplicates"] == 0, r
        assert r["rate"] > 0 and r["mid_rate"] > 0, r
    tasuki = data["durability"]["tasuki"]
    assert (tasuki["journal_mode"], tasuki["synchronous"]) == ("wal", "full"), tasuki
    table = (tmp_path / "latest.md").read_text()
    assert "best configuration" in table and "Durability" in table


def test_the_sqlite_profile_counts_statements_per_job(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    argv = [sys.executable, "-m", "benchmarks.embedded_profile", url, "-c", "8", "--jobs", "200"]
    out = subprocess.run(argv, check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "jobs/s" in out.stdout and "a job  COMMIT" in out.stdout, out.stdout
