"""`tasuki worker --workers N`: one supervisor process, N worker processes.

Each child is the same `tasuki worker` command without `--workers` (and without the
ports, which the supervisor serves), started as a new interpreter: it imports the app
itself, opens its own connections and starts its own threads, exactly as a worker run
by hand does, so nothing made in the supervisor (a connection, a lock, a thread) is ever
inherited half-alive by a fork. The supervisor never imports the app. (multiprocessing's
spawn would do the same with more machinery: the parsed options pickled across, and a
child that shows in `ps` as `multiprocessing.spawn` instead of the command it runs;
`--reload` already runs its child this way.)

Each child runs in a process group of its own, so that a Ctrl-C in a terminal (or an
init that signals the whole group) reaches the workers once, through here: a worker
that got the signal twice would take it as "exit now" and skip its grace.

- **A child that dies is started again**, after a pause that doubles from 0.5 s to
  30 s and goes back to 0.5 s once a child has lived a minute; each exit is logged with
  its status or signal. A child that exits within its first seconds failed to start: after
  `GIVE_UP_AFTER` of those in a row (an import error, a bad setting: a bad deploy) the
  supervisor stops the others and exits 1 saying why, instead of starting it forever.
- **SIGTERM/SIGINT is passed on** to every child: each stops leasing, lets its jobs
  finish within `--grace` and releases the rest without penalty. The supervisor waits
  the grace and `STOP_MARGIN`, kills what is still running, and exits 0 when every child
  stopped cleanly, 1 otherwise. A second signal is passed on too: the workers' own rule
  (a second signal exits at once) then applies to each.
- **One `/metrics`, `/livez` and `/readyz` for the group**, served here from the
  children's own (`runtime/group_endpoints.py`): the children count in prometheus_client's
  multiprocess mode under a directory the supervisor makes and removes, and each serves
  its probes on a private port (127.0.0.1, written to the run directory).

The slots of the group and their exit statuses are `runtime/children.py`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from tasuki import logs
from tasuki.errors import TasukiError
from tasuki.runtime.children import RESTART_FIRST, Child, Entry, describe_exit
from tasuki.runtime.cores import GROUP_ENV
from tasuki.runtime.group_endpoints import serve_group_endpoints
from tasuki.runtime.supervised import DIR_ENV, INDEX_ENV, PID_ENV, SERVES_ENV

RESTART_MAX = 30.0
STABLE_AFTER = 60.0  # a child that lived this long resets the pause before the next start
FAILED_START = 10.0  # a child that exits sooner than this after its start failed to start
GIVE_UP_AFTER = 4  # failed starts in a row of one child before the group gives up
STOP_MARGIN = 20.0  # beyond the grace: releasing, flushing to a slow backend, threads ending
USAGE_ERROR = (
    2  # click's exit status for a usage error  # a child's own probe answers within its ping's 2 s
)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


class Supervisor:
    """Runs `argv` `workers` times and keeps them running until SIGTERM/SIGINT."""

    def __init__(
        self,
        argv: Sequence[str],
        workers: int,
        grace: float,
        *,
        metrics: tuple[str, int] | None = None,
        health: tuple[str, int] | None = None,
    ) -> None:
        if workers < 1:
            raise TasukiError(f"workers must be at least 1, got {workers}")
        self.argv = list(argv)
        self.grace = grace
        self.metrics = metrics
        self.health = health
        self.children = [Child(i + 1) for i in range(workers)]
        self.stopping = False
        self.gave_up: str | None = None
        self.signals = 0
        self._sent = 0  # stops passed on to the children
        self.run_dir = Path(tempfile.mkdtemp(prefix="tasuki-workers-"))
        self.metrics_dir = self.run_dir / "metrics"
        self._wake = threading.Event()
        self._mutex = threading.Lock()  # each child's process, as the probe threads read it

    # The child's environment and the ports

    def child_env(self, child: Child) -> dict[str, str]:
        env = dict(os.environ)
        env[DIR_ENV] = str(self.run_dir)
        env[INDEX_ENV] = str(child.index)
        env[GROUP_ENV] = str(len(self.children))
        env[PID_ENV] = str(os.getpid())
        serves = []
        if self.metrics is not None or self.health is not None:
            serves.append("health")
        if self.metrics is not None:
            serves.append("metrics")
            env[MULTIPROC_ENV] = str(self.metrics_dir)
        env[SERVES_ENV] = ",".join(serves)
        return env

    def serve_ports(self) -> None:
        serve_group_endpoints(self, self.metrics, self.health, self.metrics_dir)

    def snapshot(self) -> list[Entry]:
        with self._mutex:
            return [(c, c.proc) for c in self.children]

    def probe_port(self, entry: Entry) -> int | None:
        """The private port of the child's probes, once it serves them."""
        _, proc = entry
        if proc is None or proc.poll() is not None:
            return None
        try:
            return int((self.run_dir / f"probes-{proc.pid}").read_text())
        except (OSError, ValueError):
            return None

    # Starting, watching, stopping

    def start(self, child: Child) -> None:
        proc = subprocess.Popen(self.argv, env=self.child_env(child), process_group=0)
        with self._mutex:
            child.proc, child.started, child.restart_at = proc, time.monotonic(), None
        logs.logger.info("worker %d started (pid %d)", child.index, proc.pid)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """Only notes the request: the main loop passes it on (no lock is taken here,
        since the main thread may hold it when the signal arrives)."""
        self.signals += 1
        name = signal.Signals(signum).name
        if self.signals == 1:
            logs.logger.warning(
                "%s received: stopping %d workers gracefully (send again to exit now)",
                name,
                len(self.children),
            )
        else:
            logs.logger.error("%s received again: the workers exit now", name)
        self.stopping = True
        self._wake.set()

    def _pass_on(self) -> None:
        """One SIGTERM to every child per stop asked for (a signal, or giving up)."""
        while self._sent < self.signals + (self.gave_up is not None):
            self._sent += 1
            for _, proc in self.snapshot():
                if proc is not None:
                    proc.send_signal(signal.SIGTERM)  # nothing if it exited already

    def _reap(self, now: float) -> None:
        """Note each child that exited, and when to start it again (or give up)."""
        for child in self.children:
            proc = child.proc
            if proc is None or proc.poll() is None or self.stopping:
                continue
            lived = now - child.started
            child.last_exit = describe_exit(proc.returncode)
            (self.run_dir / f"probes-{proc.pid}").unlink(missing_ok=True)
            with self._mutex:
                child.proc = None  # exited, and seen to: to be started again
            if lived >= STABLE_AFTER:
                child.pause = RESTART_FIRST
            child.failed_starts = child.failed_starts + 1 if lived < FAILED_START else 0
            # Status 2 is a usage error (a wrong MODULE:APP): it says the same every time.
            usage = proc.returncode == USAGE_ERROR and lived < FAILED_START
            if child.failed_starts >= GIVE_UP_AFTER or usage:
                self.gave_up = (
                    f"worker {child.index} exited with a usage error; its error is above"
                    if usage
                    else f"worker {child.index} exited {child.failed_starts} times in a row "
                    f"within {FAILED_START:g}s of starting (last: {child.last_exit}); not "
                    "starting it again: its error is above"
                )
                logs.logger.error("%s; stopping the others", self.gave_up)
                self.stopping = True
                return
            child.restart_at = now + child.pause
            logs.logger.error(
                "worker %d (pid %d) exited with %s after %.1fs; starting it again in %gs",
                child.index,
                proc.pid,
                child.last_exit,
                lived,
                child.pause,
            )
            child.pause = min(child.pause * 2, RESTART_MAX)

    def _restart_due(self, now: float) -> None:
        for child in self.children:
            if not self.stopping and child.restart_at is not None and now >= child.restart_at:
                child.restarts += 1
                child.restart_at = now + child.pause  # again then, should this start fail
                self.start(child)

    def _stop(self) -> int:
        """Wait for the running children to stop (each has its SIGTERM), passing on a
        second signal; kill what is left after the grace and `STOP_MARGIN`."""
        deadline = time.monotonic() + self.grace + STOP_MARGIN
        stopping = [(c, p) for c, p in self.snapshot() if p is not None]
        while any(p.poll() is None for _, p in stopping) and time.monotonic() < deadline:
            self._pass_on()
            self._wake.wait(0.1)
            self._wake.clear()
        clean = True
        for child, proc in stopping:
            if proc.poll() is None:
                logs.logger.error(
                    "worker %d (pid %d) did not stop within %gs: killed; its leases will lapse",
                    child.index,
                    proc.pid,
                    self.grace + STOP_MARGIN,
                )
                proc.kill()
                proc.wait()
                clean = False
                continue
            # Killed by the one SIGTERM before its handlers were in place: it was still
            # starting, and held nothing. After a second, it was told to exit at once.
            starting = proc.returncode == -signal.SIGTERM and self._sent == 1
            if proc.returncode != 0 and not starting:
                clean = False
            logs.logger.info(
                "worker %d (pid %d) exited with %s",
                child.index,
                proc.pid,
                describe_exit(proc.returncode),
            )
        return 0 if clean and self.gave_up is None else 1

    def run(self) -> int:
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.serve_ports()
            logs.logger.info("starting %d workers: %s", len(self.children), " ".join(self.argv))
            for child in self.children:
                if not self.stopping:
                    self.start(child)
            while not self.stopping:
                now = time.monotonic()
                try:
                    self._reap(now)
                    self._restart_due(now)
                except Exception:  # a child that cannot be started now: the next turn tries
                    logs.logger.exception("supervising the workers failed; trying again")
                self._wake.wait(0.1)
                self._wake.clear()
            self._pass_on()
            status = self._stop()
            if self.gave_up is not None:
                logs.logger.error("exiting: %s", self.gave_up)
            else:
                logs.logger.info("all workers stopped; exiting with status %d", status)
            return status
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            for _, proc in self.snapshot():  # an error above: no worker outlives us
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait()
            shutil.rmtree(self.run_dir, ignore_errors=True)
