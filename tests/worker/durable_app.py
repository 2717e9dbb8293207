"""The app the real-process durable-steps test runs with `tasuki worker`: each step that
runs appends a JSON line to $TASUKI_TEST_LOG, so the test counts what ran across
processes."""

from __future__ import annotations

import os
import time

import orjson

import tasuki

app = tasuki.App()
VT = float(os.environ.get("TASUKI_TEST_VT", "2.0"))


def _log(event: str, **fields: object) -> None:
    line = {"event": event, "pid": os.getpid(), "t": time.time(), **fields}
    fd = os.open(os.environ["TASUKI_TEST_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, orjson.dumps(line) + b"\n")
    finally:
        os.close(fd)


def charge(n: int) -> int:
    _log("charge", n=n)
    return n * 10


def ship(amount: int, hold: float) -> str:
    _log("ship", amount=amount)
    time.sleep(hold)  # the worker is killed here on its first run
    return f"shipped {amount}"


@app.job(visibility_timeout=VT)
def order(n: int, hold: float) -> str:
    ctx = tasuki.current()
    amount = ctx.step("charge", charge, n)
    done = ctx.step("ship", ship, amount, hold if ctx.attempt == 1 else 0.0)
    _log("done", n=n, result=done)
    return done
