"""The jobs an app knows, by name and by the queue whose raw messages they consume.

The worker needs exactly this from an app to turn a delivery into a run, so it is handed
this, not the app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tasuki.errors import ConfigurationError, UnknownJob

if TYPE_CHECKING:
    from tasuki.core.job import Job
    from tasuki.core.periodic import Periodic


class Registry:
    def __init__(self) -> None:
        self.jobs: dict[str, Job[..., Any]] = {}
        self.consumers: dict[str, Job[..., Any]] = {}
        self.periodics: list[Periodic] = []

    def add(self, job: Job[..., Any]) -> None:
        if job.name in self.jobs:
            raise ConfigurationError(f"a job named {job.name!r} is already registered on this app")
        if job.consumer:
            if job.queue in self.consumers:
                raise ConfigurationError(f"queue {job.queue!r} already has a consumer")
            self.consumers[job.queue] = job
        self.jobs[job.name] = job

    def get(self, name: str) -> Job[..., Any]:
        try:
            return self.jobs[name]
        except KeyError:
            raise UnknownJob(f"no job named {name!r} is registered on this app") from None

    def queues(self) -> set[str]:
        return {j.queue for j in self.jobs.values()}
