"""Medians over rounds, the table on stdout, results.json and latest.md."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.measure import Metrics, Settings

REFERENCE = "tasuki-redis"


@dataclass
class SystemResult:
    name: str
    title: str = ""
    settings: str = ""
    version: str | None = None
    unavailable: str | None = None
    rounds: list[Metrics] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.unavailable:
            return "unavailable"
        if not self.rounds:
            return "failed"
        return "partial" if self.errors else "ok"

    def median(self) -> Metrics:
        keys = {k for r in self.rounds for k, v in r.items() if isinstance(v, int | float)}
        return {
            k: statistics.median(r[k] for r in self.rounds if isinstance(r.get(k), int | float))
            for k in sorted(keys)
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "status": self.status,
            "settings": self.settings,
            "version": self.version,
            "unavailable": self.unavailable,
            "errors": self.errors,
            "median": self.median() if self.rounds else None,
            "rounds": self.rounds,
        }


def set_reference(name: str) -> None:
    """The system the ratios divide by (`tasuki-postgres` in the PostgreSQL section)."""
    global REFERENCE
    REFERENCE = name
    COLUMNS[-1] = ("ratio", f"{name} ÷ system")


def ratios(results: list[SystemResult]) -> dict[str, float | None]:
    """`REFERENCE`'s processing throughput divided by each system's."""
    ref = next((r for r in results if r.name == REFERENCE and r.rounds), None)
    base = ref.median().get("processed_per_s") if ref else None
    out: dict[str, float | None] = {}
    for r in results:
        mine = r.median().get("processed_per_s") if r.rounds else None
        out[r.name] = base / mine if base and mine else None
    return out


COLUMNS = [
    ("system", "system"),
    ("enqueue_per_s", "enqueue 1-by-1/s"),
    ("bulk_per_s", "bulk/s"),
    ("processed_per_s", "processed jobs/s"),
    ("startup_s", "startup s"),
    ("p50_ms", "p50 ms"),
    ("p99_ms", "p99 ms"),
    ("idle_cpu_pct", "idle CPU %"),
    ("idle_wake_ms", "idle wake ms"),
    ("ratio", "tasuki-redis ÷ system"),
]


def _fmt(key: str, value: Any) -> str:
    if value is None:
        return "—"
    if key == "ratio":
        return f"{value:.2f}x"
    if key.endswith("_per_s"):
        return f"{value:,.0f}"
    if key in {"startup_s"}:
        return f"{value:.2f}"
    if key.endswith("_ms") or key.endswith("_pct"):
        return f"{value:.1f}" if value < 100 else f"{value:,.0f}"
    return str(value)


def rows(results: list[SystemResult]) -> list[list[str]]:
    ratio = ratios(results)
    out: list[list[str]] = []
    for r in results:
        if not r.rounds:
            why = r.unavailable or (r.errors[-1].splitlines()[0] if r.errors else "")
            out.append([r.name, r.status.upper() + ": " + why[:90]] + [""] * (len(COLUMNS) - 2))
            continue
        m = r.median()
        cells = [r.name if r.status == "ok" else f"{r.name} (partial)"]
        for key, _ in COLUMNS[1:]:
            cells.append(_fmt(key, ratio.get(r.name) if key == "ratio" else m.get(key)))
        out.append(cells)
    return out


def duplicates(results: list[SystemResult]) -> list[str]:
    """Systems that ran some job more than once during a drain (no crash involved)."""
    out = []
    for r in results:
        twice = [(m.get("round"), m.get("duplicates", 0)) for m in r.rounds]
        if any(n for _, n in twice):
            per_round = ", ".join(f"{n} in round {rnd}" for rnd, n in twice if n)
            out.append(f"{r.name} ran jobs twice: {per_round}")
    return out


def _failed(row: list[str]) -> bool:
    return all(c == "" for c in row[2:])


def text_table(results: list[SystemResult]) -> str:
    header = [title for _, title in COLUMNS]
    body = rows(results)
    shown = [header, *(row for row in body if not _failed(row))]
    widths = [max(len(row[i]) for row in shown) for i in range(len(header))]
    lines = []
    for row in [header, *body]:
        if _failed(row):
            lines.append(f"{row[0].ljust(widths[0])}  {row[1]}")
            continue
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def engines_text(machine: dict[str, Any]) -> str:
    """The engines of a run and their versions (`redis-server 7.0.15, SQLite 3.40.1`)."""
    found = machine.get("engines")
    if found is None:  # a run from before the harness recorded its engines
        if REFERENCE == "tasuki-redis":
            return f"redis-server {machine['redis_server']}"
        return "PostgreSQL (version not recorded)"
    parts = []
    for name, version in found.items():
        shown = version or "(version not recorded)"
        if name == "PostgreSQL" and version:  # "PostgreSQL 16.4 (Debian ...) on x86_64..."
            shown = " ".join(version.split(" on ")[0].split()[1:])
        parts.append(f"{name} {shown}")
    return ", ".join(parts)


def load_text(machine: dict[str, Any]) -> str:
    """The load average before and after the run: on a shared machine, what else ran."""
    before, after = machine.get("load_before"), machine.get("load_after")
    if not before or not after:
        return "Load average not recorded (a run from before the harness kept it)"
    return (
        f"Load average before {'/'.join(f'{x:.2f}' for x in before)}, "
        f"after {'/'.join(f'{x:.2f}' for x in after)}"
    )


def provenance(machine: dict[str, Any]) -> str:
    """The command and the commit a run came from, and whether the code had changes."""
    commit = machine.get("tasuki_commit")
    changed = machine.get("tasuki_uncommitted")
    if commit and changed == []:
        tree = f"commit `{commit[:12]}`, a clean tree"
    elif commit and changed:
        tree = f"commit `{commit[:12]}` with uncommitted changes to {', '.join(changed)}"
    elif commit:
        tree = f"commit `{commit[:12]}` (tree state not recorded)"
    else:  # a run from before the harness recorded its commit
        revision = machine.get("tasuki_revision") or "unknown"
        tree = f"revision `{revision}`"
        if revision.endswith("-dirty"):
            tree += " (uncommitted changes, not recorded which)"
    command = machine.get("command") or "not recorded"
    return f"Command: `{command}`; tasuki at {tree}."


def markdown(
    results: list[SystemResult], machine: dict[str, Any], settings: Settings, rounds: int
) -> str:
    header = [title for _, title in COLUMNS]
    lines = [
        "<!-- written by `./dev bench` (benchmarks/report.py): do not edit by hand -->",
        "",
        f"{settings.messages:,} no-op jobs, one worker process per system, "
        f"{engines_text(machine)}, median of {rounds} interleaved round(s). "
        f"{machine['cpu']}, {machine['cores']} cores, Python {machine['python']}, "
        f"{machine['date']}. {load_text(machine)}. {provenance(machine)}",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["--:"] * (len(header) - 1)) + "|",
    ]
    for row in rows(results):
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    twice = duplicates(results)
    if twice:
        lines += [
            "",
            "Duplicates (jobs that ran twice in a drain, with no crash): " + "; ".join(twice) + ".",
        ]
    lines += ["", "Settings per system:", ""]
    for r in results:
        version = f" {r.version}" if r.version else ""
        drained = r.median().get("drained") if r.rounds else None
        share = f" (drains {drained:,.0f} jobs)" if drained and drained != settings.messages else ""
        lines.append(f"- **{r.name}**{version}: {r.settings or '—'}{share}")
    return "\n".join(lines) + "\n"


def save(
    out_dir: Path,
    results: list[SystemResult],
    machine: dict[str, Any],
    settings: Settings,
    rounds: int,
) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    data = {
        "machine": machine,
        "config": {**settings.__dict__, "rounds": rounds},
        "reference": REFERENCE,
        "ratios_processed": ratios(results),
        "systems": {r.name: r.to_json() for r in results},
    }
    (out_dir / "results.json").write_text(json.dumps(data, indent=2) + "\n")
    (out_dir / "latest.md").write_text(markdown(results, machine, settings, rounds))


def load(path: Path) -> tuple[list[SystemResult], dict[str, Any], Settings, int]:
    """Read a results.json back (to redraw the table and chart without re-running)."""
    data = json.loads(path.read_text())
    set_reference(data.get("reference", REFERENCE))
    config = dict(data["config"])
    rounds = int(config.pop("rounds"))
    settings = Settings(**{k: v for k, v in config.items() if k in Settings.__dataclass_fields__})
    results = [
        SystemResult(
            name,
            title=s["title"],
            settings=s["settings"],
            version=s["version"],
            unavailable=s["unavailable"],
            rounds=s["rounds"],
            errors=s["errors"],
        )
        for name, s in data["systems"].items()
    ]
    return results, data["machine"], settings, rounds
