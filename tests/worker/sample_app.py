"""The app that the real-process worker tests run with `tasuki worker`.

Every execution appends JSON lines to $TASUKI_TEST_LOG (O_APPEND: lines from several
processes never interleave), so the tests can count runs per message across processes.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import orjson

import tasuki

app = tasuki.App()
VT = float(os.environ.get("TASUKI_TEST_VT", "2.0"))


def record(event: str, **fields: object) -> None:
    ctx = tasuki.current()
    line = {
        "event": event,
        "id": ctx.message.id,
        "attempt": ctx.attempt,
        "fence": ctx.fencing_token,
        "pid": os.getpid(),
        "thread": threading.current_thread().name,
        "t": time.time(),
        "gil_slice": sys.getswitchinterval(),
        **fields,
    }
    fd = os.open(os.environ["TASUKI_TEST_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, orjson.dumps(line) + b"\n")
    finally:
        os.close(fd)


@app.job(visibility_timeout=VT)
def work(n: int, sleep: float = 0.0) -> None:
    record("start", n=n)
    if sleep:  # not sleep(0): it yields the GIL, and makes a fast job look slow
        time.sleep(sleep)
    record("end", n=n)


@app.job(visibility_timeout=VT)
def cooperative(n: int, duration: float) -> None:
    """Runs `duration` s unless asked to stop, then hands its message back."""
    record("start", n=n)
    if tasuki.current().wait_for_stop(duration):
        record("deferred", n=n)
        raise tasuki.Defer()
    record("end", n=n)


@app.job(visibility_timeout=VT)
def stubborn(n: int, duration: float) -> None:
    """Ignores should_stop: only the shutdown grace can take its message back."""
    record("start", n=n)
    time.sleep(duration)
    record("end", n=n)


@app.job(visibility_timeout=VT, dedup=tasuki.Dedup(key=lambda m: str(m.args[0])))
def dedup_work(n: int, copy: int, sleep: float = 0.0) -> None:
    """Copies of the same `n` are different messages about the same thing."""
    record("start", n=n, copy=copy)
    time.sleep(sleep)
    record("end", n=n, copy=copy)


@app.job(
    visibility_timeout=VT,
    unique=tasuki.Unique(mode="while_executing", on_conflict="reschedule", reschedule_delay=0.2),
)
def exclusive(n: int, sleep: float) -> None:
    record("start", n=n)
    time.sleep(sleep)
    record("end", n=n)


def report(n: int, sleep: float) -> None:
    """At most one waiting and one running, whichever worker process holds them."""
    record("start", n=n)
    time.sleep(sleep)
    record("end", n=n)


app.job(
    visibility_timeout=VT,
    unique=tasuki.Unique(
        mode="until_and_while_executing", key=lambda m: "report", reschedule_delay=0.1
    ),
)(report)


# Limits are refused where the backend does not admit them at lease time.
if app.backend.capabilities.concurrency_limits:

    @app.job(
        visibility_timeout=VT,
        concurrency_limit=tasuki.ConcurrencyLimit(2, key=lambda m: str(m.args[1])),
    )
    def limited(n: int, tenant: str, sleep: float) -> None:
        """At most two of a tenant at once, whichever worker process runs them."""
        record("start", n=n, tenant=tenant)
        time.sleep(sleep)
        record("end", n=n, tenant=tenant)

    @app.job(visibility_timeout=VT, concurrency_limit=tasuki.ConcurrencyLimit(1))
    def solo(n: int, hold: float) -> None:
        """One at a time; its first attempt holds its slot `hold` s (to be killed in)."""
        record("start", n=n)
        if tasuki.current().attempt == 1:
            time.sleep(hold)
        record("end", n=n)


if app.backend.capabilities.rate_limits:

    @app.job(visibility_timeout=VT, rate_limit=tasuki.RateLimit(5, per=1.0))
    def paced(n: int) -> None:
        """At most five starts in any second, whichever worker process runs them."""
        record("start", n=n)
