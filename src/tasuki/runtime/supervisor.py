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
- **One `/metrics` for the group**: the children count in prometheus_client's
  multiprocess mode, each in its own files under a directory the supervisor makes and
  removes, and the supervisor sums them at scrape time. A child that died still counts:
  its files stay, so the group's counters never go back (per-child endpoints summed
  by the supervisor would lose a dead child's counts, which Prometheus reads as a
  counter reset). The queue gauges, the same for every child, come from one child.
  Measured on a 2-core machine: a run's counter and histogram cost 13-15 us in
  multiprocess mode against 12.5-13 us in memory, and a scrape of two children 3-8 ms.
- **`/livez` and `/readyz` for the group**: each child serves its own on a private
  port (127.0.0.1, chosen by the system, written to the run directory) and the
  supervisor `combine`s their reports: live only while every running child is live.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import orjson

from tasuki import logs
from tasuki.errors import TasukiError
from tasuki.runtime.health import Check, Report, combine
from tasuki.runtime.probes import WSGIApp, serve, wsgi_app
from tasuki.runtime.supervised import DIR_ENV, INDEX_ENV, PID_ENV, SERVES_ENV

if TYPE_CHECKING:
    from prometheus_client.core import Metric

RESTART_FIRST = 0.5
RESTART_MAX = 30.0
STABLE_AFTER = 60.0  # a child that lived this long resets the pause before the next start
FAILED_START = 10.0  # a child that exits sooner than this after its start failed to start
GIVE_UP_AFTER = 4  # failed starts in a row of one child before the group gives up
STOP_MARGIN = 20.0  # beyond the grace: releasing, flushing to a slow backend, threads ending
PROBE_TIMEOUT = 5.0
STARTING_LIMIT = 60.0  # a child not serving its probes by then is stuck starting
USAGE_ERROR = (
    2  # click's exit status for a usage error  # a child's own probe answers within its ping's 2 s
)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def describe_exit(returncode: int) -> str:
    """`status 1` or `signal SIGKILL`, as `Popen.returncode` tells it."""
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"status {returncode}"


@dataclass
class Child:
    """One slot of the group: the process in it now, and how its starts went."""

    index: int
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    failed_starts: int = 0  # in a row
    pause: float = RESTART_FIRST
    restart_at: float | None = None
    last_exit: str = ""
    restarts: int = 0


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
        if (
            self.metrics is not None
            and self.health is not None
            and self.metrics[1] == self.health[1]
        ):
            raise TasukiError(
                f"--health-port {self.health[1]} is the metrics port: the metrics port serves "
                "/livez and /readyz already; drop --health-port or give it another port"
            )
        if self.metrics is not None:
            self.metrics_dir.mkdir()
            serve(self._probes_app(self._metrics_app()), *self.metrics, what="metrics")
        if self.health is not None:
            serve(self._probes_app(None), *self.health, what="health checks")

    def _probes_app(self, fallback: WSGIApp | None) -> WSGIApp:
        return wsgi_app(GroupHealth(self), fallback)

    def _metrics_app(self) -> WSGIApp:
        try:
            from prometheus_client import CollectorRegistry, exposition
            from prometheus_client.multiprocess import MultiProcessCollector
        except ImportError as exc:
            raise TasukiError(
                "metrics need prometheus-client: pip install 'tasuki[metrics]'"
            ) from exc
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(self.metrics_dir))  # type: ignore[no-untyped-call]
        registry.register(GroupCollector(self))

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            body = exposition.generate_latest(registry) + self._queue_gauges()
            start_response(
                "200 OK",
                [("Content-Type", exposition.CONTENT_TYPE_LATEST),
                 ("Content-Length", str(len(body)))],
            )  # fmt: skip
            return [body]

        return app

    def _queue_gauges(self) -> bytes:
        """The queue gauges, read by the first child that answers (they are the backend's)."""
        for child in self.snapshot():
            port = self.probe_port(child)
            if port is None:
                continue
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/metrics", timeout=PROBE_TIMEOUT
                ) as resp:
                    return resp.read()  # type: ignore[no-any-return]
            except OSError:
                continue
        return b""

    def snapshot(self) -> list[tuple[Child, subprocess.Popen[bytes] | None]]:
        with self._mutex:
            return [(c, c.proc) for c in self.children]

    def probe_port(self, entry: tuple[Child, subprocess.Popen[bytes] | None]) -> int | None:
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
                self._reap(now)
                self._restart_due(now)
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


class GroupHealth:
    """The children's own reports, combined: what `wsgi_app` asks a `WorkerHealth` for."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor

    def live(self) -> Report:
        return self._combined("/livez")

    def ready(self) -> Report:
        report = self._combined("/readyz")
        if not self.supervisor.stopping:
            return report
        return Report(False, {"supervisor": Check(False, "stopping"), **report.checks})

    def _combined(self, path: str) -> Report:
        entries = self.supervisor.snapshot()
        with ThreadPoolExecutor(max_workers=len(entries)) as pool:
            reports = list(pool.map(lambda e: self._ask(e, path), entries))
        return combine({f"worker {c.index}": r for (c, _), r in zip(entries, reports, strict=True)})

    def _ask(self, entry: tuple[Child, subprocess.Popen[bytes] | None], path: str) -> Report:
        child, proc = entry
        live = path == "/livez"
        if proc is None or proc.poll() is not None:
            # The supervisor is starting it again: restarting the group would do no better.
            if self.supervisor.stopping:
                detail = "stopped"
            elif child.last_exit:
                detail = f"exited with {child.last_exit}, being started again"
            else:
                detail = "not started yet"
            return Report(live, {"process": Check(live, detail)})
        port = self.supervisor.probe_port(entry)
        if port is None:
            age = time.monotonic() - child.started
            ok = live and age <= STARTING_LIMIT
            detail = f"starting (pid {proc.pid}, {age:.1f}s)" + (
                "" if age <= STARTING_LIMIT else f", stuck (more than {STARTING_LIMIT:g}s)"
            )
            return Report(ok, {"process": Check(ok, detail)})
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}{path}", timeout=PROBE_TIMEOUT
            ) as resp:
                body = resp.read()
        except urllib.error.HTTPError as err:
            body = err.read()
        except OSError as exc:
            return Report(False, {"process": Check(False, f"pid {proc.pid}: no answer: {exc}")})
        return parse_report(body)


def parse_report(body: bytes) -> Report:
    """A `Report` back from its JSON (`Report.as_dict`)."""
    data = orjson.loads(body)
    checks = {n: Check(bool(c["ok"]), str(c["detail"])) for n, c in data["checks"].items()}
    return Report(bool(data["ok"]), checks)


class GroupCollector:
    """The supervisor's own numbers: workers running, and how often each was restarted."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        running = GaugeMetricFamily(
            "tasuki_worker_processes", "Worker processes of this supervisor, by state.",
            labels=("state",),
        )  # fmt: skip
        restarts = CounterMetricFamily(
            "tasuki_worker_restarts",
            "Worker processes this supervisor started again after they exited.",
        )
        entries = self.supervisor.snapshot()
        up = sum(1 for _, p in entries if p is not None and p.poll() is None)
        running.add_metric(("running",), up)
        running.add_metric(("down",), len(entries) - up)
        restarts.add_metric((), sum(c.restarts for c, _ in entries))
        yield running
        yield restarts

    def describe(self) -> list[Metric]:
        return []
