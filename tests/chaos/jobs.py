"""The app chaos workers run (`tasuki worker tests.chaos.jobs:app`), and its producer.

Every job records its start and its end (see `recorder`). `chaos` runs in the worker's
threads, `chaos_process` in its process pool (so a killed process group has children),
`frozen` waits for as long as asked on its first attempt only, for the frozen-worker test.
Where the backend has them, `member` and `gather` make chords (a group of members, then
`gather` of their results) and `limited` runs under a concurrency limit per tenant: the
checker counts callbacks fired twice or never, and runs over a tenant's limit. Where it
has durable steps, `durable` takes steps, sleeps and waits for a signal
(`tests.chaos.durable`).

Each worker process also records every lease it took (a log handler on its `received`
events), and what its lease keeper did: a middleware writes down every extension (with
the lease's new expiry, so the checker knows when a lease it stopped extending lapsed,
and how late the extension came) and every lost lease. A
probe thread that asks to sleep 50 ms at a time writes down every wake-up that came a
quarter second or more late: printed for diagnosis only, never an excuse for a
duplicate (a worker whose own code held the GIL would measure the stall it caused). What
excuses one is measured from outside the worker, by `tests.chaos.sampler`.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
import uuid
from typing import Any

import tasuki
from tasuki import logs
from tests.chaos.durable import EFFECTS, key
from tests.chaos.recorder import note, record

VT = float(os.environ.get("TASUKI_CHAOS_VT", "2.0"))
# Crashes count as attempts; a chaos run may hit one message many times. 999: under the
# SQS backend's redrive backstop of 1,000 receives, which it refuses to reach.
RETRY = tasuki.Retry(max_attempts=999, backoff=tasuki.exponential(base=0.1, cap=1.0))

app = tasuki.App(os.environ.get("TASUKI_URL", "memory://chaos"))

# A step message carries one lease more than its job's limit (core/flows.py): under the
# SQS backend's backstop too.
STEP_RETRY = tasuki.Retry(max_attempts=998, backoff=RETRY.backoff)
# At most LIMIT runs at once per tenant: `limited`'s concurrency limit.
LIMIT = 2
TENANTS = ("t0", "t1")

PROBE_TICK = 0.05
STALL = 0.25  # a wake-up this much later than asked is written down
LATE = 0.25  # an extension this much later than due is reported as late


class KeeperProbe(tasuki.Middleware):
    def lease_extended(self, ctx: tasuki.Context, lag: float) -> None:
        # Told once the backend answered: the lease now ends at most one lease from now
        # (the server set it after the keeper asked), the upper bound the duplicate check
        # uses; and at the earliest one lease from when the keeper asked (`floor`, what
        # the limit check uses: a stop or a stall between the two moves only the first).
        length = ctx.message.lease.visibility_timeout if ctx.message.lease else VT
        note(
            "extended",
            id=ctx.message.id,
            fence=ctx.fencing_token,
            lag=lag,
            expires=time.time() + length,
            floor=ctx.lease_until,
        )

    def lease_lost(self, ctx: tasuki.Context) -> None:
        note("lost", id=ctx.message.id, fence=ctx.fencing_token)


class LeaseLog(logging.Handler):
    """Writes down every lease the worker took (its `received` log event), so the checker
    counts a redelivery to the moment another worker leased the message, not to when a
    run began: a message taken ahead may wait in that worker for a free thread or child
    process, and a worker may die holding it before it ever ran."""

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "tasuki", None)
        if logs.event_name(record) == "received" and isinstance(fields, dict):
            note("leased", id=fields["id"], attempt=fields["attempt"])


def _probe() -> None:
    before = time.time()
    while True:
        time.sleep(PROBE_TICK)
        now = time.time()
        if now - before - PROBE_TICK >= STALL:
            note("probe", **{"from": before + PROBE_TICK})
        before = now


if "TASUKI_CHAOS_WORKER" in os.environ and multiprocessing.parent_process() is None:
    app.middleware.append(KeeperProbe())
    logging.getLogger("tasuki").addHandler(LeaseLog(logging.INFO))
    threading.Thread(target=_probe, name="chaos-stall-probe", daemon=True).start()


@app.job(visibility_timeout=VT, retry=RETRY)
def chaos(n: int, sleep: float) -> None:
    record("start", n, sleep=sleep)
    time.sleep(sleep)
    ctx = tasuki.current()
    record("end", n, should_stop=ctx.should_stop, stop_reason=ctx.stop_reason)


@app.job(visibility_timeout=VT, retry=RETRY, executor="process")
def chaos_process(n: int, sleep: float) -> None:
    record("start", n, sleep=sleep)
    time.sleep(sleep)
    ctx = tasuki.current()
    record("end", n, should_stop=ctx.should_stop, stop_reason=ctx.stop_reason)


@app.job(visibility_timeout=VT, retry=RETRY)
def frozen(n: int, duration: float) -> None:
    ctx = tasuki.current()
    record("start", n)
    if ctx.attempt == 1:
        ctx.wait_for_stop(duration)
    record("end", n, should_stop=ctx.should_stop, stop_reason=ctx.stop_reason)


def _tenant(m: tasuki.Message) -> str:
    return str(m.kwargs["tenant"])


def _declare_flow_jobs(a: tasuki.App, vt: float, stubs: bool) -> None:
    """`member`, `gather` and `limited` on `a`, where its backend has what they need (the
    same options on the workers' app and the producer's: the producer stamps the limits)."""
    caps = a.backend.capabilities
    if caps.workflows:

        @a.job(name="member", visibility_timeout=vt, retry=STEP_RETRY)
        def member(n: int, sleep: float) -> int:
            if not stubs:
                record("start", n, sleep=sleep)
                time.sleep(sleep)
                record("end", n)
            return n

        @a.job(name="gather", visibility_timeout=vt, retry=STEP_RETRY)
        def gather(results: list[int], n: int) -> None:
            if not stubs:
                record("start", n, got=results)
                record("end", n)

    if caps.concurrency_limits:

        @a.job(
            name="limited",
            visibility_timeout=vt,
            retry=RETRY,
            concurrency_limit=tasuki.ConcurrencyLimit(LIMIT, key=_tenant),
        )
        def limited(n: int, sleep: float, tenant: str) -> None:
            if not stubs:
                record("start", n, sleep=sleep, tenant=tenant)
                time.sleep(sleep)
                record("end", n, tenant=tenant)


def _step(n: int, name: str, occurrence: int, sleep: float) -> dict[str, str]:
    """A durable job's step: writes down that it was called, works, and returns its own
    token, which the step's record then carries."""
    run = uuid.uuid4().hex
    record("dstep", n, step=name, occ=occurrence, run=run)
    time.sleep(sleep)
    return {"run": run}


def _charge(conn: Any, n: int) -> dict[str, str]:
    """The transactional step: one row in a table of the backend's own database."""
    run = uuid.uuid4().hex
    record("dstep", n, step="charge", occ=1, run=run)
    conn.execute(f"INSERT INTO {EFFECTS} (n, run) VALUES ({int(n)}, '{run}')")
    return {"run": run}


def _declare_durable_job(a: tasuki.App, vt: float, stubs: bool) -> None:
    """`durable` on `a`, where its backend has durable steps (tests/chaos/durable.py)."""
    if not a.backend.capabilities.durable_steps:
        return

    @a.job(name="durable", visibility_timeout=vt, retry=RETRY)
    def durable(n: int, sleep: float, nap: float, tx: bool) -> None:
        if stubs:
            return
        ctx = tasuki.current()
        got: dict[str, Any] = {key("a", 1): ctx.step("a", _step, n, "a", 1, sleep)}
        ctx.sleep(nap)
        got[key("b", 1)] = ctx.step("b", _step, n, "b", 1, sleep)
        got["signal"] = ctx.wait_for_signal("go")
        if tx:
            got[key("charge", 1)] = ctx.step_in_transaction("charge", _charge, n)
        got[key("a", 2)] = ctx.step("a", _step, n, "a", 2, sleep)
        record("dend", n, got=got)


if "TASUKI_CHAOS_WORKER" in os.environ:
    _declare_flow_jobs(app, VT, stubs=False)
    _declare_durable_job(app, VT, stubs=False)


def producer(url: str, vt: float = VT) -> tasuki.App:
    """The same jobs (names, signatures, lease), without bodies, to enqueue them."""
    p = tasuki.App(url)

    @p.job(name="chaos", visibility_timeout=vt, retry=RETRY)
    def chaos_stub(n: int, sleep: float) -> None: ...

    @p.job(name="chaos_process", visibility_timeout=vt, retry=RETRY)
    def chaos_process_stub(n: int, sleep: float) -> None: ...

    @p.job(name="frozen", visibility_timeout=vt, retry=RETRY)
    def frozen_stub(n: int, duration: float) -> None: ...

    _declare_flow_jobs(p, vt, stubs=True)
    _declare_durable_job(p, vt, stubs=True)
    return p
