"""Enqueues the ticks of periodic jobs. Every worker runs one; ids make ticks unique."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from tasuki import logs
from tasuki.errors import TasukiError
from tasuki.runtime.fatal import Fatal
from tasuki.runtime.pulse import Pulse

if TYPE_CHECKING:
    from tasuki.core.periodic import Periodic

INTERVAL = 0.5


class Scheduler:
    def __init__(
        self, periodics: list[Periodic], stopping: threading.Event, fatal: Fatal | None = None
    ) -> None:
        self.periodics = periodics
        self.stopping = stopping
        self.fatal = fatal or Fatal()
        self._thread = threading.Thread(
            target=self.fatal.guard("scheduler", self._run), name="tasuki-scheduler", daemon=True
        )
        self.pulse = Pulse("scheduler")

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        last = time.time()
        while not self.stopping.wait(INTERVAL):
            self.pulse.beat()
            now = time.time()
            for p in self.periodics:
                for tick in p.ticks(last, now):
                    try:
                        p.job.options(message_id=p.message_id(tick)).enqueue(*p.args, **p.kwargs)
                    except TasukiError as exc:
                        logs.logger.error("could not enqueue tick of %s: %s", p.job.name, exc)
                    except Exception:  # a middleware's bug: this tick is lost, not the rest
                        logs.logger.exception("could not enqueue tick of %s", p.job.name)
            last = now
