"""The app `benchmarks.workers_cpu` runs: one job of pure-Python CPU, `$BENCH_SPIN` steps."""

from __future__ import annotations

import os

import tasuki

app = tasuki.App()
SPIN = int(os.environ.get("BENCH_SPIN", "10000"))


def spin(steps: int) -> int:
    total = 0
    for i in range(steps):
        total += i * i % 7
    return total


@app.job
def cpu(n: int) -> None:
    spin(SPIN)
