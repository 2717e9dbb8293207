"""Oban (oban-py): its worker and its enqueue run in `.venv-bench-3.12` (oban needs
Python 3.12 or later; `./dev bench` makes that venv from pyenv's newest 3.12 and installs
`benchmarks/requirements-3.12.txt` there). The harness only reads and empties its
`oban_jobs` table, with psycopg."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import psycopg

from benchmarks.peers.base import ROOT, Context, SyncPeer
from benchmarks.peers.tasuki_runner import POSTGRES_ENV, postgres_url

VENV_ENV = "TASUKI_BENCH_VENV_312"
#: the queue's limit: jobs one node runs at once
LIMIT = 32


def python312() -> str:
    venv = Path(os.environ.get(VENV_ENV) or ROOT / ".venv-bench-3.12")
    py = venv / "bin" / "python"
    if not py.exists():
        raise RuntimeError(f"oban needs Python 3.12: no {py} (`./dev bench` makes it)")
    return str(py)


class ObanPeer(SyncPeer):
    name = "oban"
    title = "Oban (oban-py)"
    package = "oban"
    has_bulk = True
    entrypoint = "noop"

    def __init__(self, ctx: Context, limit: int = LIMIT) -> None:
        super().__init__(ctx)
        self.url = postgres_url()
        self.python = python312()
        self.limit = limit
        self.settings = (
            f"`Oban(pool=..., queues={{'default': {limit}}})` of `python -m "
            "benchmarks.peers.oban_app worker` (what `oban start` runs), default plugins; "
            "async `@job`"
        )
        self._run("install")
        self.conn = psycopg.connect(self.url, autocommit=True)

    def _run(self, *args: object) -> None:
        env = {**os.environ, POSTGRES_ENV: self.url, "PYTHONPATH": str(ROOT)}
        argv = [self.python, "-m", "benchmarks.peers.oban_app", *map(str, args)]
        subprocess.run(argv, env=env, cwd=ROOT, check=True, capture_output=True, timeout=120)

    def version(self) -> str:
        out = subprocess.run(
            [self.python, "-c", "import oban; print(oban.__version__)"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        return out.stdout.strip()

    def enqueue(self, i: int) -> None:
        self._run("fill", i, i + 1, self.entrypoint)

    def enqueue_bulk(self, indices: Sequence[int]) -> None:
        if len(indices):
            self._run("fill", indices[0], indices[-1] + 1, self.entrypoint)

    def worker_argv(self) -> list[str]:
        return [self.python, "-m", "benchmarks.peers.oban_app", "worker", str(self.limit)]

    def worker_env(self) -> dict[str, str]:
        return {POSTGRES_ENV: self.url}

    def pending(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM oban_jobs"
            " WHERE state IN ('available', 'scheduled', 'executing', 'retryable')"
        ).fetchone()
        return int(row[0]) if row else 0

    def reset(self) -> None:
        self.conn.execute("TRUNCATE oban_jobs")

    def close(self) -> None:
        self.conn.close()
        super().close()
