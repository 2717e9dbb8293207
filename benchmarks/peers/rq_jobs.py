"""RQ's side: the no-op function (RQ imports it by its dotted path)."""

from __future__ import annotations

from benchmarks.marks import mark


def noop(i: int) -> None:
    mark(i)
