"""Durable steps across real worker processes: a step recorded before a SIGKILL never
runs again; the step the worker died in may (DESIGN §4c)."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tasuki
from tasuki.core.policies import Constant
from tasuki.runtime.receiver import Receiver
from tests.support.processes import env_with_src
from tests.worker.helpers import ROOT, read_log, wait_until


@pytest.fixture
def spawn(log: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)


def _worker(url: str, log: Path, vt: float) -> subprocess.Popen[bytes]:
    env = env_with_src()
    env.update(TASUKI_URL=url, TASUKI_TEST_LOG=str(log), TASUKI_TEST_VT=str(vt))
    return subprocess.Popen(
        [sys.executable, "-m", "tasuki", "worker", "tests.worker.durable_app:app", "-c", "2"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _events(log: Path, event: str) -> list[dict[str, object]]:
    return [r for r in read_log(log) if r["event"] == event]


@pytest.mark.requires("durable_steps")
def test_a_step_recorded_before_a_sigkill_never_runs_again(
    shared_url: str, log: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    vt = 1.0
    app = tasuki.App(shared_url)

    @app.job(visibility_timeout=vt)
    def order(n: int, hold: float) -> str: ...

    order.options(message_id="o1").enqueue(4, 60.0)
    first = _worker(shared_url, log, vt)
    spawn.append(first)
    wait_until(lambda: len(_events(log, "ship")) == 1, 30)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    spawn.append(_worker(shared_url, log, vt))
    wait_until(lambda: len(_events(log, "done")) == 1, 30)
    assert len(_events(log, "charge")) == 1  # recorded before the kill: never again
    assert len(_events(log, "ship")) == 2  # the worker died in it: it ran again
    [done] = _events(log, "done")
    assert done["result"] == "shipped 40"
    wait_until(lambda: app.stats("default")["in_flight"] + app.stats("default")["ready"] == 0, 10)


def test_an_async_job_awaits_its_async_steps_and_replays_them() -> None:
    app = tasuki.App("memory://", middleware=[])
    ran: list[int] = []

    async def fetch(n: int) -> int:
        ran.append(n)
        return n + 1

    @app.job(retry=tasuki.Retry(3, Constant(0.0)))
    async def crawl(n: int) -> None:
        ctx = tasuki.current()
        got = await ctx.step("fetch", fetch, n)
        plain = ctx.step("plain", int, got)
        if ctx.attempt == 1:
            raise RuntimeError("after the steps")
        ran.append(plain * 100)

    crawl.enqueue(1)
    app.worker(concurrency=1, wait=0.05).run(until_idle=True, timeout=20)
    assert ran == [1, 200]
    assert app.stats()["dead"] == 0


def test_a_sleep_longer_than_the_backends_longest_delay_hops() -> None:
    app = tasuki.App("memory://", middleware=[])
    caps = app.backend.capabilities
    app.backend.capabilities = dataclasses.replace(caps, max_delay=0.2)  # type: ignore[misc]
    runs: list[float] = []

    @app.job(retry=tasuki.Retry(1))
    def nap() -> None:
        runs.append(time.monotonic())
        tasuki.current().sleep(0.7)
        runs.append(-1.0)

    started = time.monotonic()
    nap.enqueue()
    app.worker(concurrency=1, wait=0.05).run(until_idle=True, timeout=20)
    assert runs[-1] == -1.0 and runs.count(-1.0) == 1
    assert len(runs) - 1 >= 4  # 0.7 s in hops of at most 0.2 s: the first run and 3 more
    assert time.monotonic() - started >= 0.7


def test_a_run_frozen_between_its_lease_and_its_start_runs_no_step_of_a_finished_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The zombie of the PostgreSQL chaos run (1,000 faults): a worker frozen after its
    lease was granted and before the job began; meanwhile the lease lapsed, another
    worker ran the message to its end, and the ack dropped its step records. Its lease
    deadline counts from when the lease was asked for, so the woken run asks the backend
    before its first step, is told the lease is gone, and runs nothing (before, the
    deadline was unknown until the first extension, and the step ran a second time)."""
    url = f"sqlite:///{tmp_path / 'q.db'}"
    app = tasuki.App(url, middleware=[])
    ran: list[int] = []

    def charge(n: int) -> int:
        ran.append(n)
        return n

    @app.job(visibility_timeout=1.0, retry=tasuki.Retry(5, Constant(0.0)))
    def order(n: int) -> None:
        tasuki.current().step("charge", charge, n)

    order.enqueue(7)
    frozen, thawed = app.worker(concurrency=1, wait=0.05), threading.Event()
    entered = threading.Event()
    receive = Receiver.receive_many

    def receive_late(self: Receiver, deliveries: list[Any], *args: Any) -> Any:
        if not entered.is_set():  # the first worker's first lease
            entered.set()
            thawed.wait(30)  # frozen, its lease granted, the job not begun
        return receive(self, deliveries, *args)

    monkeypatch.setattr(Receiver, "receive_many", receive_late)
    frozen.start()
    other = tasuki.App(url, middleware=[])
    other.jobs["order"] = app.jobs["order"]
    try:
        assert entered.wait(20)
        time.sleep(1.2)  # the frozen run's lease lapses
        other.worker(concurrency=1, wait=0.05).run(until_idle=True, timeout=20)
        assert ran == [7]  # the other worker ran it to its end: the records are gone
        thawed.set()
        wait_until(lambda: app.stats()["in_flight"] == 0, 10)
        time.sleep(0.3)
    finally:
        thawed.set()
        frozen.stop(grace=5.0)
        other.close()
        app.close()
    assert ran == [7], "the frozen run ran the step again"
