"""The job bodies of `./dev bench embedded`, the same in every system's worker:
`$BENCH_EMBEDDED_SHAPE` picks one when the worker imports this module.

- `noop`: the scoreboard's mark alone.
- `io`: a little I/O first, a 1 ms wait (`time.sleep(0.001)`), as a job that writes a
  small file or calls a local service would spend it.
"""

from __future__ import annotations

import os
import time

from benchmarks.marks import mark

SHAPE_ENV = "BENCH_EMBEDDED_SHAPE"
DB_ENV = "BENCH_EMBEDDED_DB"
#: the query of tasuki's SQLite URL (empty: its defaults)
QUERY_ENV = "BENCH_EMBEDDED_QUERY"
IO_SECONDS = 0.001
SHAPES = ("noop", "io")

_io = os.environ.get(SHAPE_ENV, "noop") == "io"


def run(i: int) -> None:
    if _io:
        time.sleep(IO_SECONDS)
    mark(i)
