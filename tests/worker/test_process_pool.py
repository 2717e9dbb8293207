"""`executor="process"`: CPU-bound jobs in child processes, killed on timeout."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.worker import process_jobs
from tests.worker.process_jobs import app


@pytest.fixture(autouse=True)
def clean_queue() -> None:
    app.purge("default")


def test_process_job_runs_in_a_child(tmp_path: Path) -> None:
    out = tmp_path / "who.txt"
    process_jobs.whoami.enqueue_many([(str(out),) for _ in range(3)])
    app.worker(concurrency=2, processes=2).run(until_idle=True, timeout=60)
    lines = out.read_text().splitlines()
    assert len(lines) == 3
    pids = {int(line.split()[0]) for line in lines}
    assert os.getpid() not in pids
    assert app.stats()["dead"] == 0


def test_runaway_process_job_is_killed_on_timeout(tmp_path: Path) -> None:
    out = tmp_path / "who.txt"
    process_jobs.runaway.enqueue()
    process_jobs.whoami.enqueue(str(out))
    started = time.monotonic()
    app.worker(concurrency=1, processes=1).run(until_idle=True, timeout=60)
    assert time.monotonic() - started < 20
    [dead] = app.dead_letters()
    assert dead.error is not None and dead.error.type == "JobTimeout"
    assert "killed" in dead.error.message
    assert out.read_text().count("\n") == 1  # a fresh child took over after the kill
    app.purge_dead()


def test_process_job_exception_keeps_its_type() -> None:
    process_jobs.refuses.enqueue(3)
    app.worker(concurrency=1, processes=1).run(until_idle=True, timeout=60)
    [dead] = app.dead_letters()
    assert dead.attempt == 1
    assert "gave up on ValueError" in dead.reason
    assert dead.error is not None and "raised in the job process" in dead.error.traceback
    # The child's traceback starts at the job's frame; the parent's, all tasuki's, goes.
    tb = dead.error.traceback
    child = tb[tb.index("raised in the job process") :].splitlines()
    assert child[1:3] == ["Traceback (most recent call last):", "  [1 frame of tasuki]"]
    assert child[3].endswith(", in refuses"), tb
    assert "tasuki/runtime" not in tb, tb
    app.purge_dead()


def test_unpicklable_exception_comes_back_described() -> None:
    process_jobs.weird.enqueue()
    app.worker(concurrency=1, processes=1).run(until_idle=True, timeout=60)
    [dead] = app.dead_letters()
    assert dead.error is not None and dead.error.type == "RemoteJobError"
    assert "Unpicklable: cannot travel" in dead.error.message
    app.purge_dead()
