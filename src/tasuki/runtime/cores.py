"""Whether a worker process is bound by its one core, said once, with the way out.

One process runs Python on one core at a time, whatever `-c` is: jobs that compute (and,
at tens of thousands of jobs a second, the worker's own work per job) queue for the
interpreter, so more threads add nothing. More processes do: `--workers`, or
`executor="process"` for the jobs that compute. The worker does not move a job into a
process by itself, as it moves fast jobs inline (`pace.py`): a process job's arguments
and result are pickled and it shares no module state with the worker, which changes what
the job may do. So it measures, and says so once per process, where the operator looks.

Bound means: over `WINDOW` seconds the process kept `BOUND` of a core busy (a process bound by
its interpreter gets short of a whole core by the time the GIL spends changing hands) while at least
`CONTENDED` jobs were running on average (so they had to take turns), on a machine with
more usable CPUs than the worker group has processes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from tasuki import logs

# Set by the supervisor (`runtime/supervisor.py`) in each child: the group's size.
GROUP_ENV = "TASUKI_WORKERS"
WINDOW = 30.0
BOUND = 0.75
CONTENDED = 2.0


def usable_cpus() -> int:
    """The CPUs this process may run on (taskset, a cpuset), else the machine's count.
    A CPU quota (a container's `cpu.max`) is not seen: give `--workers` a number there."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on every platform
        return os.cpu_count() or 1


class CoreWatch:
    """Fed by the worker's main loop (`tick`, about once a second); warns at most once."""

    def __init__(
        self,
        running: Callable[[], int],
        *,
        cpus: int | None = None,
        processes: int | None = None,
        cpu_clock: Callable[[], float] = time.process_time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.running = running
        self.cpus = usable_cpus() if cpus is None else cpus
        self.processes = int(os.environ.get(GROUP_ENV, "1")) if processes is None else processes
        self.cpu_clock = cpu_clock
        self.clock = clock
        self.warned = False
        self._start = (clock(), cpu_clock())
        self._running_sum = 0.0
        self._ticks = 0

    @property
    def useful(self) -> bool:
        """More processes could run here: the group has fewer than the usable CPUs."""
        return self.processes < self.cpus

    def tick(self) -> None:
        if self.warned or not self.useful:
            return
        self._running_sum += self.running()
        self._ticks += 1
        now, cpu = self.clock(), self.cpu_clock()
        started, cpu_started = self._start
        elapsed = now - started
        if elapsed < WINDOW:
            return
        busy = (cpu - cpu_started) / elapsed
        running = self._running_sum / self._ticks
        self._start, self._running_sum, self._ticks = (now, cpu), 0.0, 0
        if busy >= BOUND and running >= CONTENDED:
            self.warned = True
            logs.logger.warning(
                "this worker process is bound by one core: %.0f %% of a core busy over the "
                "last %.0f s with %.1f jobs running at once on average. Its jobs take turns "
                "on the interpreter, so a higher -c adds nothing; more processes would "
                "(%d CPUs usable, %d worker process%s): `tasuki worker --workers auto`, or "
                "executor='process' for the jobs that compute",
                100 * busy,
                elapsed,
                running,
                self.cpus,
                self.processes,
                "" if self.processes == 1 else "es",
            )
