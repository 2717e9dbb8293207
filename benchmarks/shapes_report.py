"""The tables of `python -m benchmarks.shapes`: best configuration per system and shape,
the whole sweep, and tasuki's shape (c) against the ideal."""

from __future__ import annotations

from typing import Any

from benchmarks import report
from benchmarks.shape_peers import IO_SECONDS

TITLES = {
    "redis": "(a) one Redis round trip of the job's own (redis-py `INCR`)",
    "sleep": "(c) an I/O wait of 10 ms (`time.sleep`; `asyncio.sleep` in async systems)",
    "cpu": "(d) 1 ms of pure-Python CPU",
    "pg": "(b) one PostgreSQL query (`SELECT 1` on a pool of 8 connections per process)",
    "io50": "(io50) an I/O wait of 50 ms at concurrency 256 / 1,024 "
    "(`time.sleep`; `asyncio.sleep` for async jobs; gevent-patched for greenlets)",
}
TARGET = 3.0

Row = dict[str, Any]


def rate(row: Row) -> float | None:
    value = row.get("steady_per_s")
    return float(value) if value and "error" not in row else None


def line(row: Row) -> str:
    """One drain, for the progress log."""
    head = f"{row['system']} {row['config']}"
    if "error" in row:
        return f"{head}: FAILED {row['error'].splitlines()[0][:200]}"
    extra = f", INCR counted {row['counted']:,}" if "counted" in row else ""
    if row.get("duplicates"):
        extra += f", {row['duplicates']} ran twice"
    return (
        f"{head}: {row['steady_per_s']:,.0f} jobs/s after the first "
        f"(from spawn {row['processed_per_s']:,.0f}/s, startup {row['startup_s']:.2f} s, "
        f"worker CPU {row['worker_cpu_s']:.1f} s){extra}"
    )


def best(rows: list[Row], shape: str, system: str, procs: int | None = None) -> Row | None:
    """The fastest configuration of `system` on `shape` (with `procs` processes)."""
    mine = [r for r in rows if r["shape"] == shape and r["system"] == system and rate(r)]
    if procs is not None:
        mine = [r for r in mine if r["config"].startswith(f"--workers {procs} ")]
    return max(mine, key=lambda r: rate(r) or 0.0, default=None)


def shape_table(rows: list[Row], shape: str) -> list[str]:
    systems = list(dict.fromkeys(r["system"] for r in rows if r["shape"] == shape))
    peers = [s for s in systems if s not in {"tasuki", "raw"}]
    ours = best(rows, shape, "tasuki")
    ours_rate = rate(ours) if ours else None
    out = [
        f"### {TITLES[shape]}",
        "",
        "| system | best configuration | jobs/s | tasuki ÷ system |",
        "|---|---|--:|--:|",
    ]
    for system in systems:
        top = best(rows, shape, system)
        if top is None:
            out.append(f"| {system} | all configurations failed | — | — |")
            continue
        mine = rate(top) or 0.0
        ratio = f"{ours_rate / mine:.2f}x" if ours_rate else "—"
        name = "raw floor" if system == "raw" else system
        out.append(f"| {name} | {top['config']} | {mine:,.0f} | {ratio} |")
    out.append("")
    tops = [(s, best(rows, shape, s)) for s in peers]
    ranked = [(s, r) for s, r in tops if r is not None]
    if ours and ours_rate and ranked:
        system, top = max(ranked, key=lambda sr: rate(sr[1]) or 0.0)
        ratio = ours_rate / (rate(top) or 1.0)
        verdict = "met" if ratio >= TARGET else f"missed by {TARGET / ratio:.2f}x"
        out.append(
            f"tasuki's best ({ours['config']}) ÷ the best peer ({system}, {top['config']}): "
            f"**{ratio:.2f}x** (target {TARGET:.0f}x: {verdict})."
        )
    floor = best(rows, shape, "raw")
    if shape == "redis" and floor and ours_rate:
        share = ours_rate / (rate(floor) or 1.0)
        out.append(
            f"tasuki's best ÷ the raw floor's best ({floor['config']}): **{share:.0%}** "
            f"(target 70 %: {'met' if share >= 0.7 else f'short by {0.7 - share:.0%} points'})."
        )
    one, two = best(rows, shape, "tasuki", 1), best(rows, shape, "tasuki", 2)
    if shape == "cpu" and one and two:
        share = (rate(two) or 0.0) / (2 * (rate(one) or 1.0))
        out.append(
            f"tasuki `{two['config']}` ÷ 2 x `{one['config']}`: **{share:.0%}** "
            f"(target: within 10 %, {'met' if share >= 0.9 else 'missed'})."
        )
    return [*out, ""]


def matrix(rows: list[Row], shapes: list[str]) -> list[str]:
    keys = list(dict.fromkeys((r["system"], r["config"]) for r in rows))
    by = {(r["system"], r["config"], r["shape"]): r for r in rows}
    head = " | ".join(f"{s} jobs/s" for s in shapes)
    out = [f"| system | configuration | {head} |", "|---|---|" + "--:|" * len(shapes)]
    for system, config in keys:
        cells = []
        for shape in shapes:
            r = by.get((system, config, shape))
            value = rate(r) if r else None
            cells.append("failed" if r and "error" in r else f"{value:,.0f}" if value else "—")
        out.append(f"| {system} | {config} | {' | '.join(cells)} |")
    return [*out, ""]


def ideal_table(ideal: list[Row]) -> list[str]:
    out = [
        "| tasuki, one process | jobs | jobs/s | ideal (c ÷ 10 ms) | % of ideal |",
        "|---|--:|--:|--:|--:|",
    ]
    for r in ideal:
        mine = rate(r)
        if mine is None:
            out.append(f"| {r['config']} | — | failed | {r['ideal_per_s']:,.0f} | — |")
            continue
        share = mine / r["ideal_per_s"]
        out.append(
            f"| {r['config']} | {r['drained']:,} | {mine:,.0f} | {r['ideal_per_s']:,.0f} "
            f"| {share:.0%} |"
        )
    return [*out, ""]


def io_table(rows: list[Row]) -> list[str]:
    """Shape io50, every configuration against its ideal (processes x c / 50 ms), with the
    share of the drain that start-up and tail took (the first job's start is the clock's
    zero, so start-up is outside the rate; the tail is inside it)."""
    out = [
        "| system | configuration | Redis pool | jobs | jobs/s | ideal | % of ideal "
        "| start-up s | tail % |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        if r["shape"] != "io50":
            continue
        mine, ideal = rate(r), r.get("ideal_per_s") or 0.0
        head = f"| {r['system']} | {r['config']} | {r.get('pool') or 'default'}"
        if mine is None:
            out.append(f"{head} | — | failed | {ideal:,.0f} | — | — | — |")
            continue
        run_s = r["drained"] / mine
        tail = r.get("tail_s", 0.0) / run_s if run_s else 0.0
        out.append(
            f"{head} | {r['drained']:,} | {mine:,.0f} | {ideal:,.0f} | {mine / ideal:.0%} "
            f"| {r['startup_s']:.2f} | {tail:.0%} |"
        )
    return [*out, ""]


def markdown(data: dict[str, Any]) -> str:
    info, rows, ideal = data["machine"], data["rows"], data["ideal"]
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    sizes = ", ".join(
        f"{info['messages'][s]:,} for {s}"
        if info["messages"].get(s)
        else f"{IO_SECONDS:.0f} s of each configuration's ideal for {s}"
        for s in shapes
    )
    out = [
        "<!-- written by `./dev bench shapes` (benchmarks/shapes_report.py): do not edit -->",
        "",
        f"Jobs per drain: {sizes}; one drain per system, configuration and shape; "
        "rate = jobs ÷ (first job's start → every job ran and the queue is empty). "
        f"{report.engines_text(info)}, {info['cpu']}, {info['cores']} cores, "
        f"Python {info['python']}, {info['date']}; 1 ms of CPU = {info['spin_steps']:,} "
        f"steps of `spin`. {report.load_text(info)}; "
        f"{info['minutes']:.1f} min. {report.provenance(info)}",
        "",
    ]
    for shape in shapes:
        out += shape_table(rows, shape)
    if ideal:
        out += ["### (c) tasuki against the ideal", "", *ideal_table(ideal)]
    if "io50" in shapes:
        out += ["### (io50) every configuration against the ideal", "", *io_table(rows)]
    swept = [s for s in shapes if s != "io50"]
    if swept:
        out += ["### Every configuration", "", *matrix(rows, swept)]
    failed = [r for r in rows + ideal if "error" in r]
    if failed:
        out += ["Failures:", ""]
        out += [f"- {r['shape']}, {r['system']} {r['config']}: {first(r)}" for r in failed]
        out.append("")
    twice = [r for r in rows + ideal if r.get("duplicates")]
    if twice:
        out += ["Jobs run twice in a drain (no crash involved):", ""]
        out += [f"- {r['shape']}, {r['system']} {r['config']}: {r['duplicates']}" for r in twice]
        out.append("")
    return "\n".join(out)


def first(row: Row) -> str:
    return str(row["error"]).splitlines()[0][:200].replace("|", "\\|")
