"""One `tasuki worker` process draining the no-op jobs 0..n-1 of a store: the rate, from
the first of them to start to the last (the depth benchmarks' measure), and the worker's
CPU time per job meanwhile (user + system, from /proc: less at the mercy of a busy
machine than the wall time)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import NamedTuple

from benchmarks.marks import ENV as MARKS_ENV
from benchmarks.marks import Marks
from benchmarks.peers.base import ROOT
from benchmarks.peers.tasuki_app import URL_ENV

_TICKS = os.sysconf("SC_CLK_TCK")


class Drain(NamedTuple):
    rate: float  # jobs/s
    cpu: float  # worker CPU seconds per job (0 where /proc is missing)


def drain(url: str, n: int, marks: Marks, concurrency: int, timeout: float = 300) -> Drain:
    """A worker at `-c concurrency` running jobs 0..n-1 of `url`."""
    marks.clear()
    env = dict(os.environ, **{URL_ENV: url, MARKS_ENV: marks.path})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "tasuki", "worker", "benchmarks.peers.tasuki_app:app"]
    argv += ["-q", "default", "-c", str(concurrency), "--no-scheduler"]
    worker = subprocess.Popen([*argv, "--log-level", "WARNING"], env=env, cwd=ROOT)
    cpu_start = None
    try:
        deadline = time.monotonic() + timeout
        while (done := marks.done(n)) < n:
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker stopped or timed out: {done} of {n} ran")
            if cpu_start is None and done:
                cpu_start = (_cpu(worker.pid), done)
            time.sleep(0.002)
        cpu_end = _cpu(worker.pid)
    finally:
        worker.terminate()
        worker.wait(30)
    started = marks.started(range(n))
    cpu = 0.0
    if cpu_start is not None and cpu_end and cpu_start[0]:
        cpu = (cpu_end - cpu_start[0]) / max(1, n - cpu_start[1])
    return Drain(n / (max(started) - min(started)), cpu)


def _cpu(pid: int) -> float:
    """Seconds of CPU (user + system) process `pid` used so far, all threads."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS
