"""Per-job pages: each job of a queue with its outcomes and run-time percentiles over a
window, and one job's page with charts of its outcomes over that window.

The backend keeps per-minute rollups (`app.job_stats`); the chart's points are the
differences of the totals over growing windows (one read per point, `POINTS` of them),
so the page costs the same however many runs there were.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tasuki.core.console import OUTCOMES, JobStats
from tasuki.core.job import check_queue
from tasuki.errors import InvalidArgument, Unsupported
from tasuki.web.pages.kit import Kit

WINDOWS = {"15m": 900.0, "1h": 3600.0, "6h": 21600.0, "24h": 86400.0}
POINTS = 12
WIDTH, HEIGHT, PAD, LEFT = 600, 150, 24, 56
COLOURS = {"succeeded": "#1f7a44", "failed": "#b36b00", "retried": "#3465a4", "dead": "#b3261e"}


def window_of(request: Request) -> tuple[str, float]:
    name = request.query_params.get("window", "1h")
    if name not in WINDOWS:
        raise InvalidArgument(f"window must be one of {', '.join(WINDOWS)}, got {name!r}")
    return name, WINDOWS[name]


def series(totals: list[JobStats | None]) -> dict[str, list[int]]:
    """Per-interval counts of each outcome, oldest first, from the totals over windows
    growing by one interval (`totals[k]`: the last k+1 intervals)."""
    out: dict[str, list[int]] = {o: [] for o in OUTCOMES}
    for k in range(len(totals) - 1, -1, -1):
        for o in OUTCOMES:
            wide = getattr(totals[k], o) if totals[k] else 0
            narrow = getattr(totals[k - 1], o) if k and totals[k - 1] else 0
            out[o].append(max(0, wide - narrow))
    return out


def outcome_chart(points: dict[str, list[int]], window: str) -> Markup:
    """One polyline per outcome: runs per interval over the window, on a shared scale."""
    n = max(len(v) for v in points.values())
    top = max([1, *(c for v in points.values() for c in v)])
    inner_w, inner_h = WIDTH - LEFT - PAD, HEIGHT - 2 * PAD
    lines = []
    for outcome, values in points.items():
        coords = " ".join(
            f"{LEFT + inner_w * (i / max(1, n - 1)):.1f},{PAD + inner_h * (1 - v / top):.1f}"
            for i, v in enumerate(values)
        )
        lines.append(
            f'<polyline class="{outcome}" fill="none" stroke="{COLOURS[outcome]}" '
            f'stroke-width="1.5" points="{coords}"/>'
        )
    return Markup(
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="runs per interval by outcome, last {escape(window)}">'
        f'<rect x="{LEFT}" y="{PAD}" width="{inner_w}" height="{inner_h}" class="frame"/>'
        f'<text x="{LEFT - 4}" y="{PAD + 4}" text-anchor="end" class="axis">{top}</text>'
        f'<text x="{LEFT - 4}" y="{HEIGHT - PAD}" text-anchor="end" class="axis">0</text>'
        f'<text x="{LEFT}" y="{HEIGHT - 8}" class="axis">-{escape(window)}</text>'
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - 8}" text-anchor="end" class="axis">now</text>'
        f"{''.join(lines)}</svg>"
    )


def percentile_bars(stats: JobStats) -> Markup:
    """p50, p95 and p99 as horizontal bars on one scale (seconds)."""
    values = [("p50", stats.p50), ("p95", stats.p95), ("p99", stats.p99)]
    top = max([v for _, v in values if v is not None] + [1e-9])
    rows = []
    for i, (name, v) in enumerate(values):
        width = 0.0 if v is None else 440 * v / top
        label = "-" if v is None else f"≤ {v:.3g}s"
        y = 8 + i * 26
        rows.append(
            f'<text x="0" y="{y + 13}" class="axis">{name}</text>'
            f'<rect class="bar" x="40" y="{y}" width="{width:.1f}" height="18" fill="#8fb3d9"/>'
            f'<text x="{46 + width:.1f}" y="{y + 13}" class="axis">{label}</text>'
        )
    return Markup(
        f'<svg class="chart" viewBox="0 0 {WIDTH} 90" role="img" '
        f'aria-label="run-time percentiles">{"".join(rows)}</svg>'
    )


def routes(kit: Kit) -> list[Route]:
    app = kit.app

    async def jobs_page(request: Request) -> Response:
        queue = check_queue(request.path_params["queue"])
        name, window = window_of(request)

        def read() -> tuple[dict[str, JobStats] | None, str | None]:
            try:
                return app.job_stats(queue, window), None
            except Unsupported as exc:
                return None, str(exc)

        stats, refused = await run_in_threadpool(read)
        return kit.render(
            request,
            "jobs.html",
            queue=queue,
            stats=stats,
            refused=refused,
            window=name,
            windows=WINDOWS,
        )

    async def job_page(request: Request) -> Response:
        queue = check_queue(request.path_params["queue"])
        job = request.path_params["job"]
        name, window = window_of(request)
        step = window / POINTS

        def read() -> tuple[Any, Any, str | None]:
            try:
                totals = [app.job_stats(queue, step * (k + 1)).get(job) for k in range(POINTS)]
            except Unsupported as exc:
                return None, None, str(exc)
            return totals[-1] or JobStats(), series(totals), None

        stats, points, refused = await run_in_threadpool(read)
        return kit.render(
            request,
            "job.html",
            queue=queue,
            job=job,
            stats=stats,
            refused=refused,
            window=name,
            windows=WINDOWS,
            chart=None if points is None else outcome_chart(points, name),
            bars=None if stats is None else percentile_bars(stats),
            colours=COLOURS,
        )

    return [
        Route("/queues/{queue}/jobs", jobs_page),
        Route("/queues/{queue}/jobs/{job:path}", job_page),
    ]
