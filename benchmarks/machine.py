"""Where the numbers came from: the command, the commit, the engines and their versions,
CPU, Python and package versions."""

from __future__ import annotations

import os
import platform
import shlex
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from benchmarks.peers.base import ROOT

PACKAGES = [
    "tasuki", "redis", "hiredis", "orjson", "celery", "kombu", "dramatiq", "rq", "arq",
    "huey", "taskiq", "taskiq-redis", "saq", "matplotlib", "procrastinate", "pgqueuer",
    "chancy", "dbos", "psycopg", "oban",
]  # fmt: skip
#: packages installed in `.venv-bench-3.12` only (they need Python 3.12)
VENV_312 = ROOT / ".venv-bench-3.12"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found = [d.version for d in metadata.distributions(path=_site_312()) if
                     (d.metadata["Name"] or "").lower() == name]  # fmt: skip
            out[name] = found[0] if found else None
    return out


def _site_312() -> list[str]:
    return [str(p) for p in VENV_312.glob("lib/python3.*/site-packages")]


#: what a run executes: a change here makes its figures the figures of no commit
CODE = ("src", "benchmarks", "pyproject.toml", "tests/support")


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout


def git_commit() -> str | None:
    """The full commit the tree was checked out at."""
    return (_git("rev-parse", "HEAD") or "").strip() or None


def uncommitted() -> list[str] | None:
    """Tracked files of the code that runs (`CODE`) that differ from the commit: empty on a
    clean tree. The harness's own results under docs/ and untracked files do not count."""
    out = _git("status", "--porcelain", "--untracked-files=no", "--", *CODE)
    if out is None:
        return None
    return sorted(line[3:] for line in out.splitlines() if line.strip())


def git_revision(commit: str | None, changed: list[str] | None) -> str | None:
    """`<short commit>`, with `-dirty` only when the code that runs has uncommitted changes."""
    if not commit:
        return None
    return commit[:7] + ("-dirty" if changed else "")


def command() -> str:
    """The command line of this run, as `./dev bench` passes it on."""
    return shlex.join(["./dev", "bench", *sys.argv[1:]])


def postgres_version(url: str) -> str | None:
    """`SELECT version()` of the server the PostgreSQL section ran against."""
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=5) as conn:
            row = conn.execute("SELECT version()").fetchone()
    except Exception:
        return None
    return str(row[0]) if row else None


def engines(section: str, redis_version: str, postgres_url: str | None) -> dict[str, str | None]:
    """The engines the section's systems ran on, with their versions."""
    if section == "postgres":
        return {"PostgreSQL": postgres_version(postgres_url) if postgres_url else None}
    return {"redis-server": redis_version, "SQLite": sqlite3.sqlite_version}


def info(
    redis_version: str, *, section: str = "redis", postgres_url: str | None = None
) -> dict[str, Any]:
    commit, changed = git_commit(), uncommitted()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "redis_server": redis_version,
        "engines": engines(section, redis_version, postgres_url),
        "tasuki_commit": commit,
        "tasuki_uncommitted": changed,
        "tasuki_revision": git_revision(commit, changed),
        "packages": versions(),
    }
