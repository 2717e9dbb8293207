"""Find the one item that breaks a batch, so the rest of the batch goes through.

The worker's loops send batches (settles, lease keeps) in one backend call. When that call
raises something other than an outage, one item may be to blame (a value the engine
refuses, a bug on one path): the batch is split in halves, each sent again, down to the
single items that still fail; those get `blame`'s answer, every other item its real one.
An outage (`BackendUnavailable`) is no item's fault: it is raised to the loop, which
retries the whole batch with backoff. A single item that fails is tried `TRIES` times in
all before it is blamed: the failure may have been passing (a conflict, a connection
error a driver let through untranslated).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from tasuki.errors import BackendUnavailable

T = TypeVar("T")
R = TypeVar("R")

TRIES = 3
PAUSE = 0.05


def split_until_found(
    items: Sequence[T],
    call: Callable[[Sequence[T]], list[R]],
    blame: Callable[[T, Exception], R],
    first: Exception | None = None,
) -> list[R]:
    """`call(items)`, or where it fails, the answers of its halves, down to `blame(item,
    error)` for each item that fails alone. `first`: the failure of `call(items)` already
    seen (it is not called again). `BackendUnavailable` propagates."""
    if first is None:
        try:
            return call(items)
        except BackendUnavailable:
            raise
        except Exception as exc:
            first = exc
    if len(items) > 1:
        half = len(items) // 2
        return [
            *split_until_found(items[:half], call, blame),
            *split_until_found(items[half:], call, blame),
        ]
    error = first
    for attempt in range(1, TRIES):
        time.sleep(PAUSE * attempt)
        try:
            return call(items)
        except BackendUnavailable:
            raise
        except Exception as exc:
            error = exc
    return [blame(items[0], error)]


def named(error: BaseException) -> str:
    """`Type: message`, the way a reason names an error."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
