"""Durable steps on SQS (backends/sqs/durable.py): what the contract suite cannot see,
on either lock store. A signal that wakes a waiting message sends a new copy, since SQS
cannot make the delayed one visible early: the delayed copy must be deleted when it is
received, never run a second time; a sleep past `max_delay` hops without ending its
wait. On a FIFO queue (no per-message delay) the sleeping copy received early is hidden
until its wake-up, never leased, and a signal makes that copy visible."""

from __future__ import annotations

import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import tasuki
from tasuki.backends.base import Settle, Taken, Wait
from tasuki.backends.redis.slots import key_slot
from tasuki.backends.sqs import SqsBackend, durable
from tasuki.backends.sqs.durable import decode_entry, encode_entry
from tasuki.backends.sqs.records.redis_steps import slot_key
from tasuki.core.message import NOT_BEFORE_HEADER
from tasuki.core.policies import Retry
from tasuki.testing.contract.helpers import env
from tasuki.testing.servers import MotoServer
from tests.backends.sqs.support import local_url, opened


def test_the_delayed_copy_of_an_answered_wait_is_deleted_not_run(locked_url: str) -> None:
    backend = opened(locked_url)
    try:
        backend.enqueue([env("q", "w")])
        [d] = backend.lease("q", 1, 30.0)
        assert backend.settle([Settle.suspend(d.receipt, 2.0, Wait("go"))]) == [True]
        assert backend.signal("q", "w", "go", b"1") == "delivered"
        [woken] = backend.lease("q", 1, 30.0, wait=3.0)
        assert backend.take_signal(woken.receipt, "go", 1) == Taken(True, b"1")
        assert backend.settle([Settle.ack(woken.receipt)]) == [True]
        time.sleep(2.5)  # the delayed copy is visible now
        assert backend.lease("q", 10, 30.0, wait=2.0) == []
        s = backend.stats("q")
        assert (s.ready, s.in_flight, s.delayed) == (0, 0, 0)  # deleted, not hidden
    finally:
        backend.close()


def test_a_sleep_past_max_delay_hops_and_still_waits(locked_url: str) -> None:
    backend = opened(locked_url + "&max_delay=1")
    try:
        backend.enqueue([env("q", "h")])
        [d] = backend.lease("q", 1, 30.0)
        assert backend.settle([Settle.suspend(d.receipt, 60.0, Wait("go"))]) == [True]
        [hop] = backend.lease("q", 1, 30.0, wait=3.0)  # the first hop, early
        assert float(hop.headers[NOT_BEFORE_HEADER]) > time.time() + 50
        waiting = backend.waiting("q", "h")
        assert waiting is not None and waiting.signal == "go"  # an early hop ends no wait
        assert backend.settle([Settle.release(hop.receipt, 59.0, penalty=False)]) == [True]
        assert backend.signal("q", "h", "go", b"2") == "delivered"
        [woken] = backend.lease("q", 1, 30.0, wait=3.0)
        assert NOT_BEFORE_HEADER not in woken.headers
        assert woken.attempt == 1
    finally:
        backend.close()


def test_without_a_lock_store_durable_steps_are_refused(
    sqs_server: MotoServer, tmp_path: object
) -> None:
    backend = opened(local_url(sqs_server, tmp_path, locks=False))  # type: ignore[arg-type]
    try:
        assert not backend.capabilities.durable_steps
        assert backend.waiting("q", "x") is None
    finally:
        backend.close()


def test_a_kept_send_entry_keeps_binary_attributes() -> None:
    entry = {
        "MessageBody": "b",
        "MessageAttributes": {"raw": {"DataType": "Binary", "BinaryValue": b"\x00\xff"}},
        "DelaySeconds": 5,
    }
    back = decode_entry(encode_entry(entry))
    assert back["MessageAttributes"]["raw"]["BinaryValue"] == b"\x00\xff"
    assert "DelaySeconds" not in back  # the new copy is ready at once


@pytest.mark.parametrize(
    "key", ["tasuki:lock:ns:lease:q:m", "{tasuki}:lock:ns:lease:q:m", "x{a}y:lease:q:m"]
)
def test_a_messages_step_keys_share_its_lease_records_cluster_slot(key: str) -> None:
    """One script touches the lease record with the steps, signals and wait: on a Redis
    Cluster they must live in one slot."""
    for suffix in ("steps", "signals", "wait"):
        assert key_slot(slot_key(key, suffix).encode()) == key_slot(key.encode())


def _until(what: str, ok: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            raise AssertionError(f"never {what}")
        time.sleep(0.1)


def _counts(s: Any) -> tuple[int, int, int]:
    """Ready, in flight, delayed: a hidden sleeper's copy counts as delayed."""
    return s.ready, s.in_flight, s.delayed


def test_a_durable_job_completes_on_a_fifo_queue(locked_url: str) -> None:
    """A step, a sleep and a wait for a signal on a `.fifo` queue: SQS has no per-message
    delay there, so the copy re-sent to sleep is visible at once; the worker that
    receives it early hides it until its wake-up, unleased (no run, no attempt), and a
    signal makes the hidden copy visible instead of sending a new one. Every re-send
    needs its message group and a deduplication id of its own, or SQS drops it as a
    duplicate of the copy it replaces. Each step's function runs once, the job runs
    once before the sleep, once after it and once after the signal."""
    queue = f"d-{uuid.uuid4().hex[:8]}.fifo"
    app = tasuki.App(locked_url)
    calls: list[str] = []
    ended: list[Any] = []
    runs: list[float] = []
    attempts: list[int] = []
    woke: list[float] = []

    def mark(what: str) -> str:
        calls.append(what)
        return what

    @app.job(queue=queue, group=lambda args, kwargs: "g1", retry=Retry(1))
    def durable(n: int) -> None:
        ctx = tasuki.current()
        runs.append(time.time())
        attempts.append(ctx.attempt)
        ctx.step("a", mark, f"a{n}")
        ctx.sleep(3.0)
        woke.append(time.time())
        ctx.step("b", mark, f"b{n}")
        got = ctx.wait_for_signal("go", timeout=120.0)
        ended.append((n, ctx.step("c", mark, f"c{n}"), got, time.time()))

    backend = app.backend
    assert isinstance(backend, SqsBackend)
    sent: list[tuple[str, str]] = []  # (group, deduplication id) of every copy sent

    def note(params: dict[str, Any], **_: Any) -> None:
        sent.extend((e["MessageGroupId"], e["MessageDeduplicationId"]) for e in params["Entries"])

    backend.sqs.client.meta.events.register("before-parameter-build.sqs.SendMessageBatch", note)
    durable.options(message_id="f1").enqueue(1)
    worker = app.worker(queues=[queue], concurrency=2, wait=0.2)
    worker.start()
    try:

        def waits_for_go() -> bool:
            waiting = backend.waiting(queue, "f1")
            return waiting is not None and waiting.signal == "go"

        _until(f"waited for its signal; ran {calls}", waits_for_go)
        # Its copy is hidden (not ready, not leased: in flight to SQS, delayed to stats).
        _until(
            "hid the waiting copy",
            lambda: _counts(backend.stats(queue)) == (0, 0, 1),
        )
        time.sleep(2.0)  # time for the early runs today's code made
        assert len(runs) == 2, runs  # before the sleep and after it, none between
        sends = len(sent)
        signalled = time.time()
        assert app.signal(queue, "f1", "go", {"ok": 1}) == "delivered"
        _until("ended", lambda: bool(ended))
    finally:
        worker.stop()
        app.close()
    assert [e[:3] for e in ended] == [(1, "c1", {"ok": 1})]
    assert ended[0][3] - signalled < 30.0  # woken by the signal, long before its timeout
    assert len(sent) == sends  # the hidden copy was made visible: no new copy sent
    assert calls == ["a1", "b1", "c1"]
    assert len(runs) == 3 and attempts == [1, 1, 1]  # a hidden copy costs no attempt
    assert len(sent) >= 2 and {group for group, _ in sent} == {"g1"}
    ids = [dedup for _, dedup in sent]
    assert len(set(ids)) == len(ids), ids  # none dropped as a duplicate of another
    assert woke[0] - runs[0] >= 3.0 - 0.05  # the sleep lasted


def test_a_fifo_sleeper_survives_a_worker_restart(locked_url: str) -> None:
    """The worker that hid a sleeping copy stops (SIGTERM-like, no kill) and another
    process's worker takes over: the copy comes back at its wake-up and the job runs
    once more, to its end, with no attempt spent."""
    queue = f"r-{uuid.uuid4().hex[:8]}.fifo"
    runs: list[tuple[str, int]] = []
    ended: list[str] = []

    def make(name: str) -> tuple[tuple[tasuki.App, Any], Any]:
        app = tasuki.App(locked_url)

        @app.job(queue=queue, name="sleeper", retry=Retry(1))
        def sleeper() -> None:
            ctx = tasuki.current()
            runs.append((name, ctx.attempt))
            ctx.sleep(4.0)
            ended.append(name)

        return (app, sleeper), app.worker(queues=[queue], concurrency=1, wait=0.2)

    (first, job), worker = make("first")
    job.options(message_id="s1").enqueue()
    worker.start()
    try:
        _until("slept", lambda: first.backend.waiting(queue, "s1") is not None)
        _until("hid the copy", lambda: _counts(first.backend.stats(queue)) == (0, 0, 1))
    finally:
        worker.stop()
        first.close()
    assert runs == [("first", 1)]
    (second, _), worker = make("second")
    worker.start()
    try:
        _until("ended", lambda: bool(ended))
    finally:
        worker.stop()
        second.close()
    assert runs == [("first", 1), ("second", 1)]
    assert ended == ["second"]


def test_a_worker_that_dies_between_a_waits_record_and_its_resend_loses_nothing(
    locked_url: str,
) -> None:
    """The wait is recorded under the lease, then the worker dies before the settle
    re-sends the copy: the copy it leased, which carries the message's previous wait, is
    the message's only copy. When it comes back it runs (a newer wait that no copy
    carries does not make it stale, or the message would be lost), and from then on a
    signal does not wake that wait (it would send a second copy of a running message)."""
    backend = opened(locked_url)
    store = backend.sqs.steps
    assert store is not None
    try:
        backend.enqueue([env("q", "die")])
        [first] = backend.lease("q", 1, 30.0)
        assert backend.settle([Settle.suspend(first.receipt, 0.5, Wait())]) == [True]
        [woken] = backend.lease("q", 1, 1.0, wait=5.0)  # carries wait 1, which it ends
        suspend = store.suspend

        def then_die(*args: Any, **kwargs: Any) -> int | None:
            suspend(*args, **kwargs)  # wait 2 recorded under the lease...
            raise SystemExit("killed")  # ...and the worker gone before the re-send

        store.suspend = then_die  # type: ignore[method-assign]
        with pytest.raises(SystemExit):
            backend.settle([Settle.suspend(woken.receipt, 60.0, Wait("go"))])
        store.suspend = suspend  # type: ignore[method-assign]
        [again] = backend.lease("q", 10, 30.0, wait=5.0)  # the leased copy, back
        assert (again.id, again.fencing_token) == ("die", woken.fencing_token + 1)
        assert backend.signal("q", "die", "go", b"1") == "delivered"  # kept, wakes nothing
        assert backend.take_signal(again.receipt, "go", 1) == Taken(True, b"1")
        assert backend.settle([Settle.ack(again.receipt)]) == [True]
        assert backend.lease("q", 10, 30.0, wait=1.0) == []  # no second copy was sent
    finally:
        backend.close()


def test_a_suspend_refused_for_a_lost_lease_leaves_no_wait_to_wake(locked_url: str) -> None:
    """The lease is lost between the wait's record and the settle (another lease took
    the message): the settle is refused and sends nothing, and the wait it recorded is
    void: a signal no longer sends a copy for it while the message runs elsewhere."""
    backend = opened(locked_url)
    store = backend.sqs.steps
    assert store is not None
    try:
        backend.enqueue([env("q", "lost")])
        [old] = backend.lease("q", 1, 1.0)
        suspend = store.suspend
        taken: list[Any] = []

        def then_lose(*args: Any, **kwargs: Any) -> int | None:
            seq = suspend(*args, **kwargs)  # wait 1 recorded under the lease...
            taken.extend(backend.lease("q", 1, 30.0, wait=5.0))  # ...which lapses: taken
            return seq

        store.suspend = then_lose  # type: ignore[method-assign]
        assert backend.settle([Settle.suspend(old.receipt, 60.0, Wait("go"))]) == [False]
        store.suspend = suspend  # type: ignore[method-assign]
        [new] = taken
        assert new.fencing_token == old.fencing_token + 1
        assert backend.waiting("q", "lost") is None
        assert backend.signal("q", "lost", "go", b"1") == "delivered"  # kept, wakes nothing
        assert backend.take_signal(new.receipt, "go", 1) == Taken(True, b"1")
        assert backend.settle([Settle.ack(new.receipt)]) == [True]
        assert backend.lease("q", 10, 30.0, wait=1.0) == []  # no copy was sent for it
    finally:
        backend.close()


def test_a_signal_after_the_wait_is_due_sends_no_second_copy(locked_url: str) -> None:
    """A signal that comes once the wait's time has passed finds the delayed copy
    visible already (SQS rounds the delay up), maybe being received that moment: it is
    kept for that copy's run, and no new copy is sent, which would run the message a
    second time after the first ends. (Here the delayed copy is received and admitted
    while the signal's new copy is being sent, the window this closes.)"""
    backend = opened(locked_url)
    store = backend.sqs.steps
    assert store is not None
    try:
        backend.enqueue([env("q", "due")])
        [d] = backend.lease("q", 1, 30.0)
        assert backend.settle([Settle.suspend(d.receipt, 1.0, Wait("go"))]) == [True]
        time.sleep(1.5)  # its time has come: the delayed copy is visible, not yet received
        resent = store.resent
        taken: list[Any] = []

        def receive_first(*args: Any) -> None:
            taken.extend(backend.lease("q", 1, 30.0, wait=3.0))  # the delayed copy, due
            resent(*args)

        store.resent = receive_first  # type: ignore[method-assign]
        assert backend.signal("q", "due", "go", b"1") == "delivered"
        store.resent = resent  # type: ignore[method-assign]
        [woken] = taken or backend.lease("q", 1, 30.0, wait=3.0)
        assert backend.take_signal(woken.receipt, "go", 1) == Taken(True, b"1")
        assert backend.settle([Settle.ack(woken.receipt)]) == [True]
        assert backend.lease("q", 10, 30.0, wait=1.5) == []  # no second copy to run
    finally:
        backend.close()


def test_a_fifo_copy_received_before_its_wake_up_is_hidden_not_leased(locked_url: str) -> None:
    """On a FIFO queue the sleeping copy is visible at once: a lease that receives it
    hides it (no delivery, no attempt), and it holds its message group meanwhile. A
    signal makes that very copy visible: it runs as the same attempt."""
    backend = opened(locked_url)
    q = "h.fifo"
    try:
        backend.enqueue([env(q, "h")])
        [d] = backend.lease(q, 1, 30.0)
        assert backend.settle([Settle.suspend(d.receipt, 60.0, Wait("go"))]) == [True]
        assert backend.lease(q, 10, 30.0, wait=2.0) == []  # received, hidden
        backend.enqueue([env(q, "next")])  # same group (the default): waits behind it
        assert backend.lease(q, 10, 30.0, wait=2.0) == []
        s = backend.stats(q)
        # the one behind it is ready; the hidden copy sleeps (no lease): delayed
        assert (s.ready, s.in_flight, s.delayed) == (1, 0, 1)
        waiting = backend.waiting(q, "h")
        assert waiting is not None and waiting.signal == "go"
        assert backend.signal(q, "h", "go", b"1") == "delivered"
        [woken] = backend.lease(q, 1, 30.0, wait=5.0)  # first in its group again
        assert (woken.id, woken.attempt) == ("h", 1)
        assert backend.waiting(q, "h") is None  # woken: a signal wakes it no more
        assert backend.take_signal(woken.receipt, "go", 1) == Taken(True, b"1")
        assert backend.settle([Settle.ack(woken.receipt)]) == [True]
        [after] = backend.lease(q, 10, 30.0, wait=5.0)
        assert after.id == "next"
        assert backend.settle([Settle.ack(after.receipt)]) == [True]
        assert backend.lease(q, 10, 30.0, wait=1.0) == []  # no second copy of "h"
    finally:
        backend.close()


def test_cancelling_a_hidden_fifo_sleeper_frees_its_group_now(locked_url: str) -> None:
    """The cancel makes the hidden copy visible through its kept handle: it is received
    and deleted unrun, and the group's next message runs now, not after the sleep."""
    backend = opened(locked_url)
    q = "x.fifo"
    try:
        backend.enqueue([env(q, "x")])
        [d] = backend.lease(q, 1, 30.0)
        assert backend.settle([Settle.suspend(d.receipt, 300.0, Wait("go"))]) == [True]
        assert backend.lease(q, 10, 30.0, wait=2.0) == []  # received, hidden
        backend.enqueue([env(q, "next")])  # same group: waits behind the sleeper
        assert backend.cancel(q, "x") == "removed"
        got: list[Any] = []
        deadline = time.monotonic() + 10.0
        while not got and time.monotonic() < deadline:
            got = backend.lease(q, 10, 30.0, wait=1.0)
        assert [m.id for m in got] == ["next"]  # the sleeper was deleted, never run
        assert backend.settle([Settle.ack(got[0].receipt)]) == [True]
        assert backend.lease(q, 10, 30.0, wait=1.0) == []
        s = backend.stats(q)
        assert (s.ready, s.in_flight) == (0, 0)
    finally:
        backend.close()


def test_a_hidden_fifo_copy_at_the_visibility_ceiling_is_resent(
    locked_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQS keeps a message hidden at most 12 hours from its first receive (here a few
    seconds): the copy that comes back at that ceiling before its wake-up is re-sent
    (the same wait) and hidden again; the wait still wakes on its signal."""
    monkeypatch.setattr(durable, "SQS_MAX_VISIBILITY", durable.CEILING_MARGIN + 2.0)
    backend = opened(locked_url)
    q = "c.fifo"
    sends: list[int] = []
    backend.sqs.client.meta.events.register(
        "before-parameter-build.sqs.SendMessageBatch",
        lambda params, **_: sends.append(len(params["Entries"])),
    )
    try:
        backend.enqueue([env(q, "c")])
        [d] = backend.lease(q, 1, 30.0)
        assert backend.settle([Settle.suspend(d.receipt, 120.0, Wait("go"))]) == [True]
        before = len(sends)
        deadline = time.monotonic() + 30.0
        while len(sends) == before and time.monotonic() < deadline:
            assert backend.lease(q, 10, 30.0, wait=1.0) == []  # hidden, never delivered
        assert len(sends) > before  # re-sent at the ceiling
        s = backend.stats(q)
        assert s.ready + s.in_flight + s.delayed == 1  # the new copy: the old one was deleted
        assert backend.signal(q, "c", "go", b"1") == "delivered"
        [woken] = backend.lease(q, 10, 30.0, wait=5.0)
        assert (woken.id, woken.attempt) == ("c", 1)
        assert backend.settle([Settle.ack(woken.receipt)]) == [True]
        assert backend.lease(q, 10, 30.0, wait=3.0) == []
    finally:
        backend.close()


def test_a_signal_whose_hidden_copy_handle_sqs_refuses_sends_a_new_copy(locked_url: str) -> None:
    """The hidden copy's receipt handle is stale (SQS refuses it): the signal falls back
    to sending a new copy, and the hidden one is deleted when it comes back, not run."""
    backend = opened(locked_url)
    store = backend.sqs.steps
    assert store is not None
    q = "s.fifo"
    try:
        backend.enqueue([env(q, "s")])
        [d] = backend.lease(q, 1, 30.0)
        assert backend.settle([Settle.suspend(d.receipt, 4.0, Wait("go"))]) == [True]
        assert backend.lease(q, 10, 30.0, wait=1.0) == []  # hidden
        signal = store.signal

        def stale(*args: Any) -> Any:
            status, wake = signal(*args)
            assert wake is not None and wake.handle  # the hidden copy's handle was kept
            return status, wake._replace(handle="stale-" + wake.handle)

        store.signal = stale  # type: ignore[method-assign]
        assert backend.signal(q, "s", "go", b"1") == "delivered"
        store.signal = signal  # type: ignore[method-assign]
        [woken] = backend.lease(q, 1, 30.0, wait=5.0)  # the new copy
        assert (woken.id, woken.attempt) == ("s", 1)
        assert backend.take_signal(woken.receipt, "go", 1) == Taken(True, b"1")
        assert backend.settle([Settle.ack(woken.receipt)]) == [True]
        time.sleep(4.0)  # the hidden copy is visible again by now
        assert backend.lease(q, 10, 30.0, wait=2.0) == []  # deleted, not run
        s = backend.stats(q)
        assert (s.ready, s.in_flight) == (0, 0)
    finally:
        backend.close()


def test_a_lock_database_from_before_hidden_copies_gets_the_handle_column(
    sqs_server: MotoServer, tmp_path: Path
) -> None:
    """A SQLite lock store whose waits table predates the hidden copy's handle is given
    the column when the backend opens it, and a FIFO sleeper's copy is hidden there."""
    path = tmp_path / "old-locks.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE tasuki_sqs_waits (key TEXT PRIMARY KEY, seq INTEGER NOT NULL,"
            " state TEXT NOT NULL, signal TEXT NOT NULL, until REAL NOT NULL,"
            " url TEXT NOT NULL, entry TEXT NOT NULL, expires REAL NOT NULL) WITHOUT ROWID"
        )
    url = local_url(sqs_server, tmp_path, locks=False) + f"&locks=sqlite:///{path}"
    backend = opened(url)
    try:
        backend.enqueue([env("o.fifo", "o")])
        [d] = backend.lease("o.fifo", 1, 30.0)
        assert backend.settle([Settle.suspend(d.receipt, 60.0, Wait())]) == [True]
        assert backend.lease("o.fifo", 10, 30.0, wait=1.0) == []  # hidden
    finally:
        backend.close()
    with sqlite3.connect(path) as db:
        [(handle,)] = db.execute("SELECT handle FROM tasuki_sqs_waits").fetchall()
    assert handle  # the hidden copy's receipt handle, kept with the wait
