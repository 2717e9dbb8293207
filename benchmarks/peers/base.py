"""What the harness needs from each system: enqueue, a worker command, a drain check."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import redis

T = TypeVar("T")
REDIS_ENV = "BENCH_REDIS_URL"
ROOT = Path(__file__).resolve().parents[2]


class Unavailable(Exception):
    """The system cannot run here (not installed, backend not built yet): not a failure."""


@dataclass
class Context:
    redis_url: str
    tmpdir: Path


def bin_path(name: str) -> str:
    """A console script of the benchmark venv (the one running the harness)."""
    return str(Path(sys.executable).parent / name)


class Peer(ABC):
    """One system under test. Subclasses live in `benchmarks/peers/<system>_runner.py`."""

    name: str = ""
    title: str = ""
    #: human-readable worker settings, printed in the README table and results.json
    settings: str = ""
    has_bulk: bool = False
    #: fraction of --messages this system drains: < 1 only for systems so slow that a
    #: full drain would take minutes (RQ), which keeps a full run near 15 minutes
    drain_share: float = 1.0
    #: the package whose version is reported
    package: str = ""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        os.environ[REDIS_ENV] = ctx.redis_url
        #: a plain client for drain checks of the system's own keys
        self.redis = redis.Redis.from_url(ctx.redis_url)

    # -- producing -------------------------------------------------------------------
    @abstractmethod
    def enqueue_each(self, indices: Sequence[int], rate: float | None = None) -> list[float]:
        """Enqueue no-op job i for each index, one call each; with `rate` (jobs/s), paced.

        Returns the wall-clock time taken just before each enqueue call.
        """

    def enqueue_bulk(self, indices: Sequence[int]) -> None:
        raise NotImplementedError(f"{self.name} has no bulk enqueue")

    # -- consuming -------------------------------------------------------------------
    @abstractmethod
    def worker_argv(self) -> list[str]:
        """The command line of one worker process."""

    def worker_env(self) -> dict[str, str]:
        return {}

    @abstractmethod
    def pending(self) -> int:
        """Messages the system itself still holds as queued, in flight or unacked."""

    def reset(self) -> None:  # noqa: B027 - optional hook
        """Called after the harness flushed Redis (e.g. to recreate consumer groups)."""

    def close(self) -> None:
        self.redis.close()


def pace(start: float, k: int, rate: float | None) -> float:
    """Seconds to wait before the k-th send of a paced run."""
    if rate is None:
        return 0.0
    return start + k / rate - time.perf_counter()


class SyncPeer(Peer):
    @abstractmethod
    def enqueue(self, i: int) -> None: ...

    def enqueue_each(self, indices: Sequence[int], rate: float | None = None) -> list[float]:
        sent: list[float] = []
        enqueue, now = self.enqueue, time.time
        start = time.perf_counter()
        for k, i in enumerate(indices):
            if rate is not None and (wait := pace(start, k, rate)) > 0:
                time.sleep(wait)
            sent.append(now())
            enqueue(i)
        return sent


class AsyncPeer(Peer):
    """A peer whose client is asyncio-only: one event loop for the harness's lifetime."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.loop = asyncio.new_event_loop()

    def run(self, aw: Awaitable[T]) -> T:
        async def wrap() -> T:
            return await aw

        return self.loop.run_until_complete(wrap())

    @abstractmethod
    async def aenqueue(self, i: int) -> None: ...

    async def aenqueue_bulk(self, indices: Sequence[int]) -> None:
        raise NotImplementedError

    def enqueue_bulk(self, indices: Sequence[int]) -> None:
        self.run(self.aenqueue_bulk(indices))

    def enqueue_each(self, indices: Sequence[int], rate: float | None = None) -> list[float]:
        async def go() -> list[float]:
            sent: list[float] = []
            enqueue, now = self.aenqueue, time.time
            start = time.perf_counter()
            for k, i in enumerate(indices):
                if rate is not None and (wait := pace(start, k, rate)) > 0:
                    await asyncio.sleep(wait)
                sent.append(now())
                await enqueue(i)
            return sent

        return self.run(go())

    async def apending(self) -> int:
        raise NotImplementedError

    def pending(self) -> int:
        return self.run(self.apending())

    async def aclose(self) -> None:
        pass

    def close(self) -> None:
        try:
            self.run(self.aclose())
        finally:
            self.loop.close()
            super().close()


def python_argv(*args: Any) -> list[str]:
    return [sys.executable, *map(str, args)]
