from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from tests.support.processes import env_with_src

ROOT = Path(__file__).resolve().parents[2]


class WorkerProcess:
    """`tasuki worker tests.worker.sample_app:app` in its own process."""

    def __init__(
        self,
        url: str,
        log: Path,
        *args: str,
        vt: float = 2.0,
        stderr: Path | None = None,
        background: bool = False,
    ) -> None:
        env = env_with_src()
        env.update(TASUKI_URL=url, TASUKI_TEST_LOG=str(log), TASUKI_TEST_VT=str(vt))
        self.stderr_path = stderr
        out = open(stderr, "ab") if stderr else None  # noqa: SIM115
        argv = [sys.executable, "-m", "tasuki", "worker", "tests.worker.sample_app:app", *args]
        if background:  # as a shell without job control starts `cmd &`: SIGINT ignored
            argv = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *argv]
        try:
            self.proc = subprocess.Popen(
                argv,
                env=env,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=out if out is not None else subprocess.DEVNULL,
            )
        finally:
            if out is not None:
                out.close()

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def wait(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def read_log(log: Path) -> list[dict[str, Any]]:
    """Every whole line of the run log: a line still being written (read mid-write, no
    newline yet) is left for the next read; a whole line that does not parse is an error."""
    if not log.exists():
        return []
    data = log.read_bytes()
    whole = data[: data.rfind(b"\n") + 1]
    return [orjson.loads(line) for line in whole.splitlines() if line.strip()]


def by_n(records: list[dict[str, Any]], event: str) -> dict[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["event"] == event:
            grouped[r["n"]].append(r)
    return grouped


def wait_until(check: Callable[[], bool], timeout: float, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def kill_all(workers: list[WorkerProcess]) -> None:
    for w in workers:
        if w.proc.poll() is None:
            os.kill(w.proc.pid, signal.SIGKILL)
            w.proc.wait(10)
