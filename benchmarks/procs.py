"""Worker subprocesses: started in their own session, so the whole tree can be measured and
killed at once, and all tracked, so none outlives the harness (also on Ctrl-C)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

_workers: set[subprocess.Popen[bytes]] = set()
_others: set[subprocess.Popen[bytes]] = set()
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class Worker:
    """One worker process (and whatever it forks), with its output in a log file."""

    def __init__(
        self, argv: Sequence[str], env: Mapping[str, str], log: Path, cwd: Path | None = None
    ) -> None:
        self.argv = list(argv)
        self.log = log
        self._out = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            self.argv,
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _workers.add(self.proc)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_seconds(self) -> float:
        """User + system CPU of every process in the worker's session."""
        return session_cpu_seconds(self.proc.pid)

    def tail(self, lines: int = 15) -> str:
        self._out.flush()
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def stop(self, grace: float = 1.0) -> None:
        kill_session(self.proc, grace)
        self._out.close()


def session_cpu_seconds(sid: int) -> float:
    ticks = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # comm (field 2) may hold spaces; fields after it are split from the last ')'.
        fields = raw[raw.rindex(")") + 2 :].split()
        # fields[0] is state (field 3): session is field 6, utime/stime 14/15.
        if int(fields[3]) == sid:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / CLOCK_TICKS


def process_cpu_seconds(pid: int) -> float:
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def kill_session(proc: subprocess.Popen[bytes], grace: float = 3.0) -> None:
    """SIGTERM the session, SIGKILL whatever is left after `grace` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if proc.poll() is not None and not _session_alive(proc.pid):
                _forget(proc)
                return
            time.sleep(0.02)
    proc.wait(timeout=5)
    _forget(proc)


def _session_alive(sid: int) -> bool:
    try:
        os.killpg(sid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _forget(proc: subprocess.Popen[bytes]) -> None:
    _workers.discard(proc)
    _others.discard(proc)


def track(proc: subprocess.Popen[bytes]) -> None:
    """Have `kill_all` kill a process that is not a worker (the redis-server)."""
    _others.add(proc)


def kill_all_workers() -> None:
    """Kill every worker that is still around (between runs: no strays)."""
    for proc in list(_workers):
        kill_session(proc, grace=1.0)


def kill_all() -> None:
    """Kill every process this harness started that is still around."""
    kill_all_workers()
    for proc in list(_others):
        kill_session(proc, grace=1.0)
