"""The rate chart: an inline SVG drawn on the server, acked/s and dead/s over the last hour."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

from tasuki.web.sampler import Rate

WIDTH, HEIGHT, PAD, LEFT = 600, 140, 24, 56


def span_label(seconds: float) -> str:
    return f"-{seconds / 60:.0f} min" if seconds >= 120 else f"-{seconds:.0f}s"


def rate_chart(rates: Sequence[Rate], now: float, window: float = 3600.0) -> Markup:
    """Two polylines (acked per second, dead per second) on a shared scale.

    The time axis covers the last `window` seconds, or less while the dashboard has not
    been sampling that long (at least a minute).
    """
    top = max([r.acked for r in rates] + [r.dead for r in rates] + [1.0])
    span = window if not rates else min(window, max(60.0, now - rates[0].at))
    inner_w, inner_h = WIDTH - LEFT - PAD, HEIGHT - 2 * PAD

    def x(at: float) -> float:
        return LEFT + inner_w * max(0.0, 1 - (now - at) / span)

    def y(value: float) -> float:
        return PAD + inner_h * (1 - value / top)

    def line(values: list[tuple[float, float]], css: str) -> str:
        if not values:
            return ""
        points = " ".join(f"{x(at):.1f},{y(v):.1f}" for at, v in values)
        return f'<polyline class="{css}" fill="none" stroke-width="1.5" points="{points}"/>'

    acked = line([(r.at, r.acked) for r in rates], "acked")
    dead = line([(r.at, r.dead) for r in rates], "dead")
    label = escape(f"{top:.3g}/s")
    empty = (
        ""
        if rates
        else f'<text x="{LEFT + inner_w / 2}" y="{HEIGHT / 2}" text-anchor="middle" class="muted">'
        "collecting samples…</text>"
    )
    return Markup(
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="acked and dead messages per second, last hour">'
        f'<rect x="{LEFT}" y="{PAD}" width="{inner_w}" height="{inner_h}" class="frame"/>'
        f'<text x="{LEFT - 4}" y="{PAD + 4}" text-anchor="end" class="axis">{label}</text>'
        f'<text x="{LEFT - 4}" y="{HEIGHT - PAD}" text-anchor="end" class="axis">0</text>'
        f'<text x="{LEFT}" y="{HEIGHT - 8}" class="axis">{span_label(span)}</text>'
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - 8}" text-anchor="end" class="axis">now</text>'
        f"{acked}{dead}{empty}</svg>"
    )
