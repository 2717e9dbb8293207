"""PostgreSQL peers the harness names but cannot run here, each saying why."""

from __future__ import annotations

import importlib

from benchmarks.peers.base import Context


class _Unported:
    module = ""
    why = ""

    def __init__(self, ctx: Context) -> None:
        # Not installed: the import error says so (the table shows FAILED: not installed).
        importlib.import_module(self.module)
        raise RuntimeError(self.why)


class ObanPy(_Unported):
    name = "oban-py"
    module = "oban"
    why = (
        "oban-py needs Python 3.12 or later, so its client cannot load in this table's "
        "harness (3.11), which enqueues with each system's own client while it times "
        "latency; `./dev bench shapes postgres` runs it from .venv-bench-3.12"
    )
