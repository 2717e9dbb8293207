"""Stalls of the chaos workers, measured from outside them: `python -m tests.chaos.sampler
PIDS LOG`, a process of its own that the runner starts.

Every `TICK` it reads, for each worker process named in PIDS (lines `worker pid`, which
the runner appends as it starts workers), `/proc/PID/stat` (the state: `T` stopped, `D`
uninterruptible sleep) and `/proc/PID/task/*/schedstat` (the nanoseconds each thread spent
runnable but waiting for a CPU, as the kernel counts them). An interval in which the
process was stopped or in `D`, or in which one of its threads waited for a CPU half of
the interval or more, is part of a stall; consecutive ones make one stall, written to
LOG as a `stall` record (`from`, `t`, `kind`, `waited`: the longest any one thread of
the worker waited for a CPU over it) once it is `MIN_STALL` long or more.

What it cannot see is a thread waiting for the GIL (that is a sleep on a futex): a
worker whose own code holds the GIL too long is not excused by this, which is the point.
It exits when its standard input closes (the runner holds the other end).
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.chaos.recorder import note
from tests.support.processes import env_with_src

TICK = 0.05
MIN_STALL = 0.1  # shorter stalls are not written down (a lease is seconds long)
BUSY = 0.5  # a thread that waited this share of an interval for a CPU was starved


@dataclass
class Watched:
    worker: str
    pid: int
    waits: dict[str, int]  # thread id -> run-queue nanoseconds at the last sample
    sampled: float
    since: float | None = None  # the start of the stall under way
    kinds: str = ""
    waited: float = 0.0


def _state(pid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2]  # the name in parentheses may hold spaces


def _waits(pid: int) -> dict[str, int]:
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            out[tid] = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return out


def _close(w: Watched, now: float) -> None:
    if w.since is not None and now - w.since >= MIN_STALL:
        kind = "T" if "T" in w.kinds else "D" if "D" in w.kinds else "runq"
        note(
            "stall",
            worker=w.worker,
            pid=w.pid,
            kind=kind,
            waited=round(w.waited, 4),
            **{"from": w.since},
        )
    w.since, w.kinds, w.waited = None, "", 0.0


def sample(watched: dict[int, Watched], now: float) -> None:
    for pid, w in list(watched.items()):
        state = _state(pid)
        if state is None or state == "Z":
            _close(w, now)
            del watched[pid]
            continue
        waits = _waits(pid)
        interval = max(now - w.sampled, 1e-6)
        waited = max(((ns - w.waits.get(tid, ns)) / 1e9 for tid, ns in waits.items()), default=0.0)
        w.waits, w.sampled = waits, now
        stuck = state in "TtD"
        if stuck or waited >= BUSY * interval:
            if w.since is None:
                w.since = now - (waited if not stuck else interval)
            w.kinds += state if stuck else "r"
            w.waited += waited
        else:
            _close(w, now)


def start_sampler(pids: Path, log: Path) -> subprocess.Popen[bytes]:
    """The stall sampler (`tests.chaos.sampler`), a process of its own: it runs until its
    standard input closes."""
    pids.touch()
    return subprocess.Popen(
        [sys.executable, "-m", "tests.chaos.sampler", str(pids), str(log)],
        stdin=subprocess.PIPE,
        env=env_with_src(),
        cwd=Path(__file__).resolve().parents[2],
    )


def stop_sampler(sampler: subprocess.Popen[bytes] | None) -> None:
    """Close its input; it writes down any stall under way and exits."""
    if sampler is None or sampler.poll() is not None:
        return
    assert sampler.stdin is not None
    sampler.stdin.close()
    try:
        sampler.wait(10)
    except subprocess.TimeoutExpired:
        sampler.kill()
        sampler.wait(10)


def main(argv: list[str]) -> int:
    pids, log = Path(argv[0]), argv[1]
    os.environ["TASUKI_CHAOS_LOG"] = log
    watched: dict[int, Watched] = {}
    seen = 0
    note("sampler")  # up and sampling
    while True:
        if select.select([sys.stdin], [], [], TICK)[0] and not sys.stdin.buffer.read1(1):
            break  # the runner closed our input: the run is over
        now = time.time()
        if pids.exists():
            text = pids.read_text()
            lines = text[: text.rfind("\n") + 1].splitlines()
            for line in lines[seen:]:
                worker, pid = line.split()
                watched[int(pid)] = Watched(worker, int(pid), _waits(int(pid)), now)
            seen = len(lines)
        sample(watched, now)
    for w in watched.values():
        _close(w, time.time())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
