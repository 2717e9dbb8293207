"""The scoreboard every peer's no-op job writes to: a small file mapped in shared memory.

Job `i` stores the wall-clock time it started at slot `i` and bumps the byte at slot `i`.
That is two stores into memory, well under a microsecond, and the same code runs in every
system's worker, so no system pays more than another for being observed. The harness reads
the same mapping to see how many jobs ran (and whether any ran twice) without sending a
single command to Redis while a worker is being timed.

Layout: 8-byte capacity, `capacity` count bytes, padding to 8, `capacity` float64 times.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from collections.abc import Sequence

ENV = "BENCH_MARKS"
_HEADER = struct.Struct("<q")
_TIME = struct.Struct("<d")


class Marks:
    def __init__(self, path: str, capacity: int | None = None) -> None:
        """Open the scoreboard at `path`; with `capacity`, create (or reset) it first."""
        if capacity is not None:
            with open(path, "wb") as f:
                f.truncate(self._size(capacity))
                f.write(_HEADER.pack(capacity))
        fd = os.open(path, os.O_RDWR)
        try:
            self._mm = mmap.mmap(fd, 0)
        finally:
            os.close(fd)
        (self.capacity,) = _HEADER.unpack_from(self._mm, 0)
        self._flags = _HEADER.size
        self._times = self._flags + (self.capacity + 7) // 8 * 8
        self.path = path

    @staticmethod
    def _size(capacity: int) -> int:
        return _HEADER.size + (capacity + 7) // 8 * 8 + 8 * capacity

    def hit(self, i: int) -> None:
        """What a job does: note when it started, and that it ran once more."""
        _TIME.pack_into(self._mm, self._times + 8 * i, time.time())
        at = self._flags + i
        self._mm[at] = min(self._mm[at] + 1, 255)

    def clear(self) -> None:
        """Zero every slot (only while no worker runs)."""
        self._mm[self._flags :] = bytes(len(self._mm) - self._flags)

    def done(self, n: int) -> int:
        """How many of slots 0..n-1 have run at least once."""
        return n - self._mm[self._flags : self._flags + n].count(0)

    def ran(self, i: int) -> bool:
        return self._mm[self._flags + i] > 0

    def duplicates(self, n: int) -> int:
        """How many of slots 0..n-1 ran more than once."""
        return sum(1 for b in self._mm[self._flags : self._flags + n] if b > 1)

    def started(self, indices: Sequence[int]) -> list[float]:
        return [_TIME.unpack_from(self._mm, self._times + 8 * i)[0] for i in indices]

    def first_start(self, n: int) -> float:
        values = struct.unpack_from(f"<{n}d", self._mm, self._times)
        return min(v for v in values if v > 0)

    def start_times(self, n: int) -> list[float]:
        """The start times of slots 0..n-1 that ran, sorted."""
        return sorted(v for v in struct.unpack_from(f"<{n}d", self._mm, self._times) if v > 0)

    def close(self) -> None:
        self._mm.close()


_mine: Marks | None = None


def mark(i: int) -> None:
    """The body of every system's no-op job."""
    global _mine
    if _mine is None:
        _mine = Marks(os.environ[ENV])
    _mine.hit(i)
