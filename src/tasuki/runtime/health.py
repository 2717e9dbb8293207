"""Is this worker alive, and can it do its work? Answers as data, for `/livez` and `/readyz`.

*Alive* means every loop of the worker is turning: the fetchers, the lease keeper, the
settler, the scheduler and the event loop of async jobs each beat their `Pulse`
(`runtime/pulse.py`) once a turn, and say when they wait for work (a settler with
nothing to send, a fetcher backing off from a failing backend), which may last. A loop
that has neither beaten nor said it waits for `stuck_after` seconds is stuck: a backend
call that never returns, a thread that died. Restarting the process is then the cure,
which is what a failing liveness probe does.

*Ready* means the backend answers a ping now. A backend that is down makes the worker
not ready but still alive: restarting it would not bring the backend back.

The answers are `Report` values, so that a process supervising several workers can ask
each for its report and `combine` them; `runtime/probes.py` serves them over HTTP.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tasuki.errors import InvalidArgument, TasukiError

if TYPE_CHECKING:
    from tasuki.backends.base import Backend
    from tasuki.runtime.pulse import Pulse
    from tasuki.runtime.worker import Worker

STUCK_AFTER = 10.0
PING_TIMEOUT = 2.0


@dataclass(frozen=True, slots=True)
class Check:
    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class Report:
    """`ok` and the check behind it, by name (a loop, the backend)."""

    ok: bool
    checks: Mapping[str, Check]

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": {n: {"ok": c.ok, "detail": c.detail} for n, c in self.checks.items()},
        }


def combine(reports: Mapping[str, Report]) -> Report:
    """Several workers' reports as one (each check named after its worker): ok when all are."""
    checks = {f"{who} {name}": c for who, r in reports.items() for name, c in r.checks.items()}
    return Report(all(r.ok for r in reports.values()), checks)


def liveness(
    pulses: list[Pulse], stuck_after: float, now: float | None = None, *, stopping: bool = False
) -> Report:
    """Every loop beat within `stuck_after` seconds, or is waiting for work."""
    now = time.monotonic() if now is None else now
    checks: dict[str, Check] = {}
    if stopping:
        checks["worker"] = Check(True, "stopping: letting running jobs finish")
    for pulse in pulses:
        age = now - pulse.at
        if stopping or pulse.waiting:
            checks[pulse.name] = Check(True, f"waiting ({age:.1f}s)")
        else:
            checks[pulse.name] = Check(
                age <= stuck_after,
                f"last turn {age:.1f}s ago"
                + ("" if age <= stuck_after else f", stuck (more than {stuck_after:g}s)"),
            )
    return Report(all(c.ok for c in checks.values()), checks)


class Ping:
    """Pings the backend with a time limit, one ping at a time: a backend that hangs
    answers "not ready" after `timeout` instead of hanging the probe, and a probe
    arriving while that ping still hangs does not start another."""

    def __init__(self, backend: Backend, timeout: float = PING_TIMEOUT) -> None:
        self.backend = backend
        self.timeout = timeout
        self._mutex = threading.Lock()
        self._running: threading.Thread | None = None
        self._result: Check = Check(False, "not pinged yet")

    def __call__(self) -> Check:
        with self._mutex:
            if self._running is None:
                done = threading.Event()
                self._running = threading.Thread(
                    target=self._ping, args=(done,), name="tasuki-health-ping", daemon=True
                )
                self._running.start()
            else:
                return Check(False, "the last ping still has no answer")
        if not done.wait(self.timeout):
            return Check(False, f"no answer within {self.timeout:g}s")
        return self._result

    def _ping(self, done: threading.Event) -> None:
        started = time.monotonic()
        try:
            self.backend.ping()
            result = Check(True, f"answered in {1000 * (time.monotonic() - started):.0f} ms")
        except TasukiError as exc:
            result = Check(False, str(exc))
        except Exception as exc:  # a driver's own error: still an answer, not a crash
            result = Check(False, f"{type(exc).__name__}: {exc}")
        with self._mutex:
            self._result = result
            self._running = None
        done.set()


class WorkerHealth:
    """The health of one worker in this process."""

    def __init__(self, worker: Worker, stuck_after: float = STUCK_AFTER) -> None:
        if stuck_after <= 0:
            raise InvalidArgument(f"stuck_after must be > 0 seconds, got {stuck_after!r}")
        self.worker = worker
        self.stuck_after = stuck_after
        self._ping = Ping(worker.backend)

    def live(self) -> Report:
        return liveness(self.worker.pulses(), self.stuck_after, stopping=self.worker.stopping)

    def ready(self) -> Report:
        checks = {"backend": self._ping()}
        failed = self.worker.fatal.reason
        if failed is not None:
            checks["worker"] = Check(False, f"stopping with status 1: {failed}")
        elif self.worker.stopping:
            checks["worker"] = Check(False, "stopping")
        return Report(all(c.ok for c in checks.values()), checks)
