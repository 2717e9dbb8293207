"""docs/benchmarks/throughput.png: processing throughput and enqueue rates per system."""

from __future__ import annotations

from pathlib import Path

from benchmarks.report import REFERENCE, SystemResult


def draw(results: list[SystemResult], path: Path, subtitle: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [r for r in results if r.rounds]
    if not done:
        return
    names = [r.name for r in done]
    med = [r.median() for r in done]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 0.45 * len(done) + 2.2), sharey=True)
    y = list(range(len(done)))

    def color(name: str) -> str:
        if name == REFERENCE:
            return "#c0392b"
        if name.startswith("tasuki"):
            return "#e67e22"
        if name == "raw-redis":
            return "#7f8c8d"
        return "#2c7fb8"

    processed = [m.get("processed_per_s", 0.0) for m in med]
    left.barh(y, processed, color=[color(n) for n in names])
    for yi, v in zip(y, processed, strict=True):
        left.text(v, yi, f" {v:,.0f}", va="center", fontsize=8)
    left.set_title("processed jobs/s (one worker process, from its start)")
    left.set_yticks(y, names)
    left.invert_yaxis()
    left.margins(x=0.18)

    h = 0.4
    each = [m.get("enqueue_per_s", 0.0) for m in med]
    bulk = [m.get("bulk_per_s", 0.0) for m in med]
    right.barh([v - h / 2 for v in y], each, height=h, color="#2c7fb8", label="one by one")
    right.barh([v + h / 2 for v in y], bulk, height=h, color="#41ab5d", label="bulk")
    right.set_title("enqueued jobs/s (one client, one thread)")
    right.set_xscale("log")
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.05), ncol=2, fontsize=8)
    fig.suptitle(subtitle, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
