"""`/livez` and `/readyz` of a real worker process, broken from the inside.

The jobs of `tests/worker/health_app.py` break the worker that runs them through a
wrapped backend: one makes every lease extension hang (the lease keeper is stuck in
its backend call, as on a network call that never returns), one makes every backend
call fail (a server that is down).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import tasuki
from tasuki.core.message import JOB_HEADER
from tasuki.testing.servers import free_port
from tests.support.deps import need
from tests.support.processes import env_with_src
from tests.worker.helpers import ROOT, wait_until

APP = "tests.worker.health_app:app"


def get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, orjson.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, orjson.loads(err.read())


def answers(port: int) -> bool:
    """The probes answer, and the worker's loops have started: its health server is up
    a moment before them, when /livez has nothing to check yet."""
    try:
        _, live = get(port, "/livez")
    except OSError:
        return False
    return bool(live["checks"])


@pytest.fixture
def start(sqlite_url: str, tmp_path: Path) -> Iterator[Any]:
    procs: list[subprocess.Popen[bytes]] = []

    def start_worker(*args: str) -> subprocess.Popen[bytes]:
        env = {**env_with_src(), "TASUKI_URL": sqlite_url}
        with open(tmp_path / "worker.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tasuki", "worker", APP, "-c", "2", *args],
                env=env,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        procs.append(proc)
        return proc

    yield start_worker
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)


def run_job(url: str, job: str) -> None:
    app = tasuki.App(url)
    app.send("default", b'{"args": [], "kwargs": {}}', headers={JOB_HEADER: job})
    app.close()


def test_a_frozen_lease_keeper_turns_livez_red(start: Any, sqlite_url: str) -> None:
    port = free_port()
    start("--health-port", str(port), "--stuck-after", "2")
    wait_until(lambda: answers(port), timeout=30)
    status, live = get(port, "/livez")
    assert status == 200, live
    assert {"fetcher default", "lease keeper", "settler"} <= set(live["checks"]), live
    status, ready = get(port, "/readyz")
    assert status == 200 and ready["checks"]["backend"]["ok"], ready

    run_job(sqlite_url, "freeze_keeper")
    frozen_at = time.monotonic()
    wait_until(lambda: get(port, "/livez")[0] == 503, timeout=15, interval=0.1)
    took = time.monotonic() - frozen_at
    status, live = get(port, "/livez")
    keeper = live["checks"]["lease keeper"]
    assert not keeper["ok"] and "stuck" in keeper["detail"], live
    assert live["checks"]["settler"]["ok"] and live["checks"]["fetcher default"]["ok"], live
    # The keeper froze about 0.5 s after the job started (its first extension), then the
    # 2 s threshold: red within a few seconds, with room for a loaded machine.
    assert took < 10, took
    assert get(port, "/readyz")[0] == 200  # the backend itself still answers


def test_a_backend_that_is_down_is_not_ready_but_alive(start: Any, sqlite_url: str) -> None:
    port = free_port()
    start("--health-port", str(port), "--stuck-after", "3")
    wait_until(lambda: answers(port), timeout=30)
    assert get(port, "/readyz")[0] == 200
    run_job(sqlite_url, "cut_off_backend")
    wait_until(lambda: get(port, "/readyz")[0] == 503, timeout=15, interval=0.1)
    status, ready = get(port, "/readyz")
    assert "injected fault: ping fail" in ready["checks"]["backend"]["detail"], ready
    # Fetchers back off and the settler retries: the loops turn, so restarting the
    # process would not help, and /livez says so for longer than the threshold.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        status, live = get(port, "/livez")
        assert status == 200, live
        time.sleep(0.25)


def test_the_metrics_port_serves_the_probes_too(start: Any) -> None:
    need("prometheus_client")
    port = free_port()
    start("--metrics-port", str(port))
    wait_until(lambda: answers(port), timeout=30)
    assert get(port, "/livez")[0] == 200
    assert get(port, "/readyz")[0] == 200
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        assert b"tasuki_queue_messages" in resp.read()


def test_the_same_port_twice_is_refused(start: Any) -> None:
    port = free_port()
    proc = start("--metrics-port", str(port), "--health-port", str(port))
    assert proc.wait(30) == 1


def test_a_loop_that_cannot_go_on_ends_the_process_with_status_1(
    start: Any, sqlite_url: str, tmp_path: Path
) -> None:
    """Not a live worker that leases jobs it can never settle: it says why and exits 1
    (the `--workers` supervisor then starts it again)."""
    port = free_port()
    proc = start("--health-port", str(port))
    wait_until(lambda: answers(port), timeout=30)
    run_job(sqlite_url, "break_settler")
    assert proc.wait(30) == 1
    log = (tmp_path / "worker.log").read_text()
    assert "the settler loop failed: RuntimeError: a bug in the settler" in log, log
    assert "stops with status 1" in log, log
