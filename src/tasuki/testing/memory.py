"""An app declared for production, run on a fresh `memory://` store for one test."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tasuki.backends.urls import backend_from_url

if TYPE_CHECKING:
    from tasuki.app import App


@contextmanager
def use_memory(app: App) -> Iterator[App]:
    """Inside the block, `app` and every job of it store on a fresh, private `memory://`
    store (its locks included); after it, the app is back on what it used before.

    The memory backend keeps the same contract as the others (leases, attempts, dead
    letters, idempotent ids, locks), so what passes on it passes for the semantics.
    """
    store = backend_from_url("memory://")
    restore = app.use_backend(store)
    try:
        yield app
    finally:
        restore()
        store.close()
