"""The app chaos workers run (`tasuki worker tests.chaos.jobs:app`), and its producer.

Every job records its start and its end (see `recorder`). `chaos` runs in the worker's
threads, `chaos_process` in its process pool (so a killed process group has children),
`frozen` waits for as long as asked on its first attempt only, for the frozen-worker test.
"""

from __future__ import annotations

import os
import time

import tasuki
from tests.chaos.recorder import record

VT = float(os.environ.get("TASUKI_CHAOS_VT", "2.0"))
# Crashes count as attempts; a chaos run may hit one message many times. 999: below
# SQS's redrive backstop (1000 receives), which refuses max_attempts at or over it.
RETRY = tasuki.Retry(max_attempts=999, backoff=tasuki.exponential(base=0.1, cap=1.0))

app = tasuki.App(os.environ.get("TASUKI_URL", "memory://chaos"))


@app.job(visibility_timeout=VT, retry=RETRY)
def chaos(n: int, sleep: float) -> None:
    record("start", n)
    time.sleep(sleep)
    record("end", n, should_stop=tasuki.current().should_stop)


@app.job(visibility_timeout=VT, retry=RETRY, executor="process")
def chaos_process(n: int, sleep: float) -> None:
    record("start", n)
    time.sleep(sleep)
    record("end", n, should_stop=tasuki.current().should_stop)


@app.job(visibility_timeout=VT, retry=RETRY)
def frozen(n: int, duration: float) -> None:
    ctx = tasuki.current()
    record("start", n)
    if ctx.attempt == 1:
        ctx.wait_for_stop(duration)
    record("end", n, should_stop=ctx.should_stop, stop_reason=ctx.stop_reason)


def producer(url: str, vt: float = VT) -> tasuki.App:
    """The same jobs (names, signatures, lease), without bodies, to enqueue them."""
    p = tasuki.App(url)

    @p.job(name="chaos", visibility_timeout=vt, retry=RETRY)
    def chaos_stub(n: int, sleep: float) -> None: ...

    @p.job(name="chaos_process", visibility_timeout=vt, retry=RETRY)
    def chaos_process_stub(n: int, sleep: float) -> None: ...

    @p.job(name="frozen", visibility_timeout=vt, retry=RETRY)
    def frozen_stub(n: int, duration: float) -> None: ...

    return p
