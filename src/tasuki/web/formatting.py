"""How the dashboard writes times and durations in its cells: short, never in exponent
notation, a histogram's quantile as the bucket it falls in."""

from __future__ import annotations

import time

from tasuki.core.reliability import Histogram


def ago(seconds: float) -> str:
    if seconds < 1:
        return "0s"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def seconds(value: float | None) -> str:
    """A duration for a table cell: `-` when there is none, else 3 significant digits,
    never in exponent notation (0.9996 s rounds to `1 s`, not `1e+03 ms`; 1234 s is
    `1234 s`)."""
    if value is None:
        return "-"
    if abs(value) < 5e-7:  # below what 3 digits of milliseconds can show
        return "0 ms"
    ms = f"{value * 1000:.3g}"
    if "e" not in ms and abs(float(ms)) < 1000:
        return f"{ms} ms"
    whole = f"{value:.3g}"
    return f"{whole} s" if "e" not in whole else f"{value:.0f} s"


def bound(hist: Histogram, q: float) -> str:
    """The bucket a quantile falls in, as its upper bound (`≤ 0.25 s`, `> 300 s`)."""
    top = hist.quantile(q)
    if top is None:
        return "-"
    if top == float("inf"):
        return f"> {seconds(hist.bounds[-1])}"
    return f"≤ {seconds(top)}"


def when(at: float | None) -> str:
    if at is None:
        return "-"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
    delta = at - time.time()
    return f"{stamp} ({'in ' + ago(delta) if delta >= 0 else ago(-delta) + ' ago'})"
