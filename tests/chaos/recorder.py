"""The execution record, kept apart from the backend: one JSON line per event.

A job appends to $TASUKI_CHAOS_LOG with O_APPEND, one write per line, so lines from many
processes never interleave, and a process killed mid-job leaves whole lines only. Each
line names the message, its attempt and fencing token, the process and the worker it
belongs to ($TASUKI_CHAOS_WORKER, inherited by a worker's child processes), and the time.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

import tasuki


def record(event: str, n: int, **fields: object) -> None:
    """A job's own start or end."""
    ctx = tasuki.current()
    note(
        event,
        n=n,
        id=ctx.message.id,
        attempt=ctx.attempt,
        fence=ctx.fencing_token,
        token=ctx.message.lease.token if ctx.message.lease else "",
        **fields,
    )


def note(event: str, **fields: object) -> None:
    """Any line of the record, stamped with its process, worker and time."""
    line = {
        "event": event,
        "pid": os.getpid(),
        "worker": os.environ.get("TASUKI_CHAOS_WORKER", "?"),
        "t": time.time(),
        **fields,
    }
    fd = os.open(os.environ["TASUKI_CHAOS_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, orjson.dumps(line) + b"\n")
    finally:
        os.close(fd)


@dataclass
class Execution:
    """One run of one message: its start record, and its end record if it got there."""

    n: int
    id: str
    attempt: int
    fence: int
    worker: str
    pid: int
    started: float
    ended: float | None = None
    should_stop: bool = False
    stop_reason: str = ""


def read(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    out = []
    for line in log.read_bytes().splitlines():
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue  # cannot happen with one write per line; never let it hide the rest
    return out


def executions(log: Path) -> dict[int, list[Execution]]:
    """Executions per message number, in start order; an end joins its start by fence."""
    runs: dict[int, list[Execution]] = {}
    open_: dict[tuple[str, int, int], Execution] = {}
    for r in read(log):
        if r["event"] not in ("start", "end"):
            continue
        key = (r["id"], r["fence"], r["pid"])
        if r["event"] == "start":
            e = Execution(r["n"], r["id"], r["attempt"], r["fence"], r["worker"], r["pid"], r["t"])
            runs.setdefault(r["n"], []).append(e)
            open_[key] = e
        elif r["event"] == "end" and key in open_:
            e = open_.pop(key)
            e.ended = r["t"]
            e.should_stop = bool(r.get("should_stop"))
            e.stop_reason = str(r.get("stop_reason") or "")
    for list_ in runs.values():
        list_.sort(key=lambda e: e.started)
    return runs


@dataclass
class Stall:
    """A worker process that got no CPU (or no GIL) for a while: measured, not injected."""

    worker: str
    pid: int
    start: float
    end: float


@dataclass
class KeeperNote:
    """What a worker's lease keeper saw: an extension made late, or a lease lost."""

    event: str  # "late" or "lost"
    worker: str
    id: str
    fence: int
    t: float
    lag: float = 0.0


def stalls(log: Path) -> list[Stall]:
    return [
        Stall(r["worker"], r["pid"], r["from"], r["t"]) for r in read(log) if r["event"] == "stall"
    ]


def keeper_notes(log: Path) -> list[KeeperNote]:
    return [
        KeeperNote(r["event"], r["worker"], r["id"], r["fence"], r["t"], r.get("lag", 0.0))
        for r in read(log)
        if r["event"] in ("late", "lost")
    ]
