"""Real worker processes, and the faults the runner does to them and to their server.

Each worker is `tasuki worker tests.chaos.jobs:app` in a session of its own, so its
process group holds it and the children of its process pool. Every fault is written
down (`Fault`) with when it began and ended and which workers it reached; the checker
explains duplicates with these records and nothing else.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.chaos.backends import ChaosBackend, Service
from tests.chaos.proxy import Proxy
from tests.chaos.recorder import read
from tests.support.processes import env_with_src

ROOT = Path(__file__).resolve().parents[2]
NET_KINDS = ("latency", "drop", "blackhole")
# How long the first kill of a short run looks for a busy worker: worker processes take a
# few seconds to start on a loaded machine.
BUSY_WAIT = 20.0


@dataclass
class Fault:
    kind: str  # kill, killpg, stop, restart, writer-kill, latency, drop, blackhole
    family: str  # the --faults name it belongs to: kill, stop, restart, net
    start: float
    end: float
    workers: frozenset[str] | None  # None: every worker (server or network faults)
    detail: str = ""

    def reaches(self, worker: str) -> bool:
        return self.workers is None or worker in self.workers


class Worker:
    def __init__(self, wid: str, url: str, log: Path, vt: float, stderr: Path, *args: str):
        env = env_with_src()
        env.update(
            TASUKI_URL=url,
            TASUKI_CHAOS_LOG=str(log),
            TASUKI_CHAOS_VT=str(vt),
            TASUKI_CHAOS_WORKER=wid,
        )
        self.wid = wid
        with open(stderr, "ab") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tasuki",
                    "worker",
                    "tests.chaos.jobs:app",
                    "--processes",
                    "1",
                    *args,
                ],
                env=env,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=out,
                start_new_session=True,  # its own process group: it and its children
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def freeze_outside_writes(self, url: str, tries: int = 200) -> None:
        """SIGSTOP the worker's process group at a moment none of it holds SQLite's write
        lock (any moment on another backend). Stopped inside a write transaction, it
        would keep the database's one write lock and so stop every worker with it, since
        no process can take a lock from a stopped one: SQLite's nature, and not the lost
        lease a test of one frozen worker is about."""
        shm = Path(url.removeprefix("sqlite:///") + "-shm") if url.startswith("sqlite:") else None
        for _ in range(tries):
            self.signal_group(signal.SIGSTOP)
            if shm is None:
                return
            time.sleep(0.05)  # a lock call under way when the signal came completes first
            if not any(_in_group(pid, self.proc.pid) for pid in _write_lock_holders(shm)):
                return
            self.signal_group(signal.SIGCONT)
            time.sleep(0.005)
        raise AssertionError(f"worker {self.wid} held the SQLite write lock at every try")

    def stop(self, timeout: float = 30.0) -> None:
        if not self.alive():
            self.signal_group(signal.SIGKILL)  # children a killed worker left behind
            return
        self.signal_group(signal.SIGCONT)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal_group(signal.SIGKILL)
            self.proc.wait(10)
        self.signal_group(signal.SIGKILL)


class Pool:
    """M workers, kept at M: a killed worker is replaced at once, like a supervisor would."""

    def __init__(
        self,
        size: int,
        url: str,
        log: Path,
        vt: float,
        stderr: Path,
        *args: str,
        pids: Path | None = None,
    ):
        self.url, self.log, self.vt, self.stderr, self.args = url, log, vt, stderr, args
        self.pids = pids  # where each worker's pid is written down, for the sampler
        self.count = 0
        self.workers: list[Worker] = []
        for _ in range(size):
            self.spawn()

    def spawn(self) -> Worker:
        self.count += 1
        w = Worker(f"w{self.count}", self.url, self.log, self.vt, self.stderr, *self.args)
        self.workers.append(w)
        if self.pids is not None:
            with open(self.pids, "a") as out:
                out.write(f"{w.wid} {w.pid}\n")
        return w

    def replace(self, dead: Worker) -> None:
        dead.proc.wait(10)
        self.workers.remove(dead)
        dead.signal_group(signal.SIGKILL)
        self.spawn()

    def stop(self) -> None:
        for w in self.workers:
            w.signal_group(signal.SIGCONT)
        for w in self.workers:
            if w.alive():
                w.proc.send_signal(signal.SIGTERM)
        for w in self.workers:
            w.stop()


class Injector:
    """Does one random fault of the allowed kinds, and says what it did."""

    def __init__(
        self,
        backend: ChaosBackend,
        service: Service,
        pool: Pool,
        proxy: Proxy | None,
        vt: float,
        rng: random.Random,
        families: list[str],
        interrupt_first: bool = False,
    ) -> None:
        self.backend, self.service, self.pool, self.proxy = backend, service, pool, proxy
        self.vt, self.rng = vt, rng
        self.families = [f for f in families if f in backend.faults]
        if "net" in self.families and proxy is None:
            self.families.remove("net")
        # Kinds take turns (in a seeded order), so even a short run does every one of them;
        # which worker, when, and for how long stay random.
        rng.shuffle(self.families)
        # A short run must interrupt something, or it proves nothing: its first fault is a
        # kill that waits for a worker in the middle of a job (the producer is still at
        # work then). Later kinds come when they come: by then the queue may be empty.
        self._wait_busy = 0.0
        if interrupt_first and "kill" in self.families:
            self.families.remove("kill")
            self.families.insert(0, "kill")
            self._wait_busy = BUSY_WAIT
        self._families = itertools.cycle(self.families)
        self._kills = itertools.cycle(rng.sample([False, True], 2))
        self._nets = itertools.cycle(rng.sample(["latency", "drop", "blackhole"], 3))

    def kinds(self) -> set[str]:
        """Every fault kind this injector will do, once all have had their turn."""
        names = {"kill": {"kill", "killpg"}, "stop": {"stop"}, "net": set(NET_KINDS)}
        names["restart"] = {"writer-kill" if self.backend.crash == "writer" else "restart"}
        return set().union(*(names[f] for f in self.families))

    def one(self) -> Fault:
        family = next(self._families)
        if family == "kill":
            return self.kill()
        if family == "stop":
            return self.stop()
        if family == "restart":
            return self.crash_writer() if self.backend.crash == "writer" else self.restart()
        return self.network()

    def _victim(self, wait: float = 0.0) -> Worker:
        """A worker in the middle of a job when there is one (looking for up to `wait`
        seconds): a fault on an idle worker proves little."""
        deadline = time.monotonic() + wait
        while True:
            # With a wait, only a run with time left to interrupt will do: one about to
            # end could be acked before the signal lands.
            busy = _busy(self.pool.log, time.time() + 0.1 if wait else 0.0)
            running = [w for w in self.pool.workers if w.wid in busy and w.alive()]
            if running or time.monotonic() >= deadline:
                return self.rng.choice(running or self.pool.workers)
            time.sleep(0.02)

    def kill(self) -> Fault:
        w = self._victim(self._wait_busy)
        self._wait_busy = 0.0
        group = next(self._kills)
        t = time.time()
        if group:
            w.signal_group(signal.SIGKILL)
        else:
            w.proc.send_signal(signal.SIGKILL)
        self.pool.replace(w)
        kind = "killpg" if group else "kill"
        return Fault(kind, "kill", t, t, frozenset({w.wid}))

    def stop(self) -> Fault:
        w = self._victim()
        pause = self.vt + self.rng.uniform(0.5, 1.5)
        t = time.time()
        w.signal_group(signal.SIGSTOP)
        # On SQLite a worker frozen inside a write transaction keeps the write lock: every
        # other worker's extensions and acks wait for it, so the fault reaches them all.
        # So does one frozen in the SQS backend's SQLite lock store (its lease records).
        files = [f for f in (self.service.path, getattr(self.service, "locks", None)) if f]
        locked = any(
            _in_group(pid, w.pid)
            for f in files
            for pid in _write_lock_holders(f.with_name(f.name + "-shm"))
        )
        time.sleep(pause)
        w.signal_group(signal.SIGCONT)
        reached = None if locked else frozenset({w.wid})
        detail = f"{pause:.1f}s" + (" holding the write lock" if locked else "")
        return Fault("stop", "stop", t, time.time(), reached, detail)

    def restart(self) -> Fault:
        t = time.time()
        self.service.restart()
        return Fault("restart", "restart", t, time.time(), None)

    def crash_writer(self) -> Fault:
        """SIGKILL a worker caught holding the SQLite write lock (seen in /proc/locks)."""
        assert self.service.path is not None
        shm = self.service.path.with_name(self.service.path.name + "-shm")
        by_pid = {w.pid: w for w in self.pool.workers}
        deadline = time.monotonic() + 2.0
        caught: Worker | None = None
        while caught is None and time.monotonic() < deadline:
            for pid in _write_lock_holders(shm):
                caught = by_pid.get(pid)
                if caught is not None:
                    break
            else:
                time.sleep(0.001)
        w = caught or self._victim()
        t = time.time()
        w.proc.send_signal(signal.SIGKILL)
        self.pool.replace(w)
        detail = "in a write transaction" if caught else "no writer caught within 2s"
        return Fault("writer-kill", "restart", t, t, frozenset({w.wid}), detail)

    def network(self) -> Fault:
        assert self.proxy is not None
        kind = next(self._nets)
        t = time.time()
        if kind == "latency":
            delay = self.rng.uniform(0.02, 0.2)
            self.proxy.set_latency(delay)
            time.sleep(self.rng.uniform(1.0, 2.0))
            self.proxy.set_latency(0.0)
            detail = f"{delay * 1000:.0f}ms"
        elif kind == "drop":
            self.proxy.drop()
            detail = ""
        else:
            length = self.vt + self.rng.uniform(0.5, 1.5)
            self.proxy.blackhole(length)
            time.sleep(length + 0.05)
            detail = f"{length:.1f}s"
        return Fault(kind, "net", t, time.time(), None, detail)


def _busy(log: Path, until: float = 0.0) -> set[str]:
    """Workers with a run started and not ended, from the execution records; with `until`,
    only runs that planned to sleep past that moment."""
    open_runs: dict[tuple[str, int, int], tuple[str, float]] = {}
    for r in read(log):
        if r["event"] == "start":
            ends = r["t"] + r.get("sleep", 0.0)
            open_runs[(r["id"], r["fence"], r["pid"])] = (r["worker"], ends)
        elif r["event"] == "end":
            open_runs.pop((r["id"], r["fence"], r["pid"]), None)
    return {worker for worker, ends in open_runs.values() if not until or ends > until}


# The unix VFS keeps WAL locks as POSIX byte locks on the -shm file; byte 120 is the
# write lock, held from a write transaction's first write until its commit.
WAL_WRITE_LOCK_BYTE = 120


def _write_lock_holders(shm: Path) -> list[int]:
    try:
        st = os.stat(shm)
        text = Path("/proc/locks").read_text()
    except OSError:
        return []
    inode = f":{st.st_ino} "
    pids = []
    for line in text.splitlines():
        if "->" in line or "POSIX" not in line or inode not in line + " ":
            continue
        fields = line.split()
        # N: POSIX ADVISORY WRITE pid maj:min:inode start end
        try:
            pid, start, end = int(fields[4]), fields[6], fields[7]
        except (IndexError, ValueError):
            continue
        if fields[3] == "WRITE" and int(start) <= WAL_WRITE_LOCK_BYTE <= _end(end):
            pids.append(pid)
    return pids


def _in_group(pid: int, group: int) -> bool:
    try:
        return os.getpgid(pid) == group
    except ProcessLookupError:
        return False


def _end(text: str) -> int:
    return 1 << 62 if text == "EOF" else int(text)
