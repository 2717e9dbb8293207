"""The console on SQS (DESIGN §4d), as far as the engine allows: pauses, the worker
registry and per-job stats live in the `locks=` store (records/console.py), since SQS
has no place for them. Waiting messages cannot be listed without receiving them (which
would hide them from the workers and count a receive), so listing "ready" and
"delayed" and `retry_now` are refused by the `browse_waiting` capability.
"""

from __future__ import annotations

from collections.abc import Sequence

from tasuki.backends.sqs.plumbing import Plumbing
from tasuki.backends.sqs.records.console import StoreConsole
from tasuki.core.console import BrowseState, JobStats, JobTally, WorkerInfo

LOCKS_ADVICE = "give it a lock store that keeps them: locks=sqlite or redis"


class Console:
    def __init__(self, sqs: Plumbing) -> None:
        self.sqs = sqs

    def _records(self, capability: str, what: str) -> StoreConsole:
        if self.sqs.console is None:
            raise self.sqs.refusal(capability, what, LOCKS_ADVICE)
        return self.sqs.console

    def refuse_browse(self, state: BrowseState) -> Exception:
        """Why a listing is refused: waiting messages (ready, delayed) by the engine,
        named by `browse_waiting`; in-flight and dead ones are not listed yet."""
        if state in ("ready", "delayed"):
            return self.sqs.refusal(
                "browse_waiting",
                f"list {state} messages (SQS shows a waiting message only by receiving it)",
                "count them with `stats`, or inspect one by id",
            )
        return self.sqs.refusal("browsing", f"list {state} messages", "inspect one by id")

    def pause(self, queue: str) -> None:
        self._records("pause", "pause a queue").pause(queue)

    def resume(self, queue: str) -> None:
        self._records("pause", "pause a queue").resume(queue)

    def paused(self) -> set[str]:
        return self._records("pause", "pause a queue").paused()

    def announce(self, info: WorkerInfo, tallies: Sequence[JobTally]) -> bool:
        return self._records("worker_registry", "keep a registry of workers").announce(
            info, tallies
        )

    def workers(self) -> list[WorkerInfo]:
        return self._records("worker_registry", "keep a registry of workers").workers()

    def stop_worker(self, id: str) -> bool:
        return self._records("worker_registry", "keep a registry of workers").stop_worker(id)

    def job_stats(self, queue: str, window: float) -> dict[str, JobStats]:
        return self._records("job_stats", "keep per-job stats").job_stats(queue, window)
