"""An opt-in pool of child processes for CPU-bound jobs (`executor="process"`).

A thread cannot be killed, so a runaway CPU-bound job in a thread can only be asked to
stop. In a child process it can be killed: on timeout the child gets SIGKILL and is
replaced, and the job fails with `JobTimeout` like any other. Children are spawned (not
forked) so they never inherit the worker's threads and locks.
"""

from __future__ import annotations

import importlib
import multiprocessing
import pickle
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING, Any, NamedTuple

from tasuki.core.context import Context, set_current
from tasuki.core.message import Message
from tasuki.core.outcome import Outcome
from tasuki.errors import Defer, JobProcessDied, JobTimeout, RemoteJobError, Skip
from tasuki.logs import job_traceback

if TYPE_CHECKING:
    from tasuki.runtime.task import Task


class _Child:
    def __init__(self, process: BaseProcess, conn: Connection) -> None:
        self.process = process
        self.conn = conn

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()


class ProcessPool:
    def __init__(self, size: int) -> None:
        self._size = size
        self._mp = multiprocessing.get_context("spawn")
        self._idle: SimpleQueue[_Child] = SimpleQueue()
        self._count = 0
        self._mutex = threading.Lock()
        self._busy: set[_Child] = set()
        self._closed = False

    def _spawn(self) -> _Child:
        parent, child = self._mp.Pipe()
        process = self._mp.Process(
            target=_child_main, args=(child, list(sys.path)), name="tasuki-process-job", daemon=True
        )
        process.start()
        child.close()
        return _Child(process, parent)

    def _acquire(self) -> _Child:
        while True:
            try:
                child = self._idle.get_nowait()
            except Empty:
                with self._mutex:
                    if self._count < self._size:
                        self._count += 1
                        break
                try:
                    child = self._idle.get(timeout=0.1)
                except Empty:
                    continue
            if child.process.is_alive():
                return child
            with self._mutex:
                self._count -= 1
        try:
            return self._spawn()
        except BaseException:
            with self._mutex:
                self._count -= 1
            raise

    def run(
        self,
        module: str,
        qualname: str,
        message: Message,
        call_with_message: bool,
        deadline: float | None,
    ) -> Any:
        """Run the job in a child: what it returned; raise what it raised, or JobTimeout
        after killing it."""
        if self._closed:
            raise JobProcessDied("the process pool is shut down")
        child = self._acquire()
        with self._mutex:
            self._busy.add(child)
        healthy = False
        try:
            child.conn.send((module, qualname, _portable(message), call_with_message))
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not child.conn.poll(timeout):
                raise JobTimeout("process job ran past its timeout; its process was killed")
            status, payload = child.conn.recv()
            healthy = True
        except JobTimeout:
            raise  # a TimeoutError, hence an OSError: not a dead child
        except (EOFError, OSError) as exc:
            raise JobProcessDied(
                f"the process running the job died (exit code {child.process.exitcode})"
            ) from exc
        finally:
            with self._mutex:
                self._busy.discard(child)
            if healthy and not self._closed:
                self._idle.put(child)
            else:
                child.kill()
                with self._mutex:
                    self._count -= 1
        if status == "error":
            raise payload
        if status == "unsendable":
            return Unsendable(payload)
        return payload

    def shutdown(self) -> None:
        """Kill every child, busy or idle (used after the shutdown grace ran out)."""
        self._closed = True
        with self._mutex:
            busy = list(self._busy)
        for child in busy:
            child.kill()
        while True:
            try:
                self._idle.get_nowait().kill()
            except Empty:
                break


def _portable(message: Message) -> Message:
    return Message(
        id=message.id,
        queue=message.queue,
        body=message.body,
        headers=dict(message.headers),
        attempt=message.attempt,
        enqueued_at=message.enqueued_at,
        job=message.job,
        args=message.args,
        kwargs=dict(message.kwargs),
        lease=message.lease,
        max_attempts=message.max_attempts,
    )


def _resolve(module: str, qualname: str) -> Any:
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return getattr(target, "fn", target)


def _child_main(conn: Connection, path: list[str]) -> None:
    sys.path[:] = path
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    cache: dict[tuple[str, str], Any] = {}
    while True:
        try:
            module, qualname, message, call_with_message = conn.recv()
        except (EOFError, OSError):
            return
        try:
            fn = cache.get((module, qualname))
            if fn is None:
                fn = cache[(module, qualname)] = _resolve(module, qualname)
            set_current(Context(message))
            value = fn(message) if call_with_message else fn(*message.args, **message.kwargs)
            reply: tuple[str, Any] = ("ok", value)
        except BaseException as exc:
            reply = ("error", _sendable(exc))
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return
        except Exception as exc:  # a return value that cannot be pickled back
            conn.send(("unsendable", _sendable(exc)))


def _sendable(exc: BaseException) -> BaseException:
    """The exception itself when it pickles (so `Retry.on` still matches its type)."""
    tb = job_traceback(exc)
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RemoteJobError(type(exc).__name__, str(exc), tb)
    exc.add_note(f"--- raised in the job process ---\n{tb.rstrip()}")
    return exc


class Unsendable(NamedTuple):
    """A child's return value that could not be pickled back: an error only for a job
    that keeps its result; any other job's return value is dropped anyway."""

    error: BaseException


def invoke(pool: ProcessPool, task: Task) -> Outcome:
    """Run a process job in a child; its timeout is enforced by killing the child."""
    job, ctx = task.job, task.ctx
    outcome = Outcome()
    started = time.perf_counter()
    try:
        value = pool.run(
            job.fn.__module__, job.fn.__qualname__, ctx.message, job.consumer, ctx.deadline
        )
        if isinstance(value, Unsendable):
            if job.keep_result:
                raise value.error
            value = None
        outcome.result = value
    except Skip as s:
        outcome.decide("skip", reason=s.reason)
    except Defer as d:
        outcome.decide("defer", delay=d.delay, reason=d.reason)
    except JobTimeout:
        ctx.request_stop("timeout")
        outcome.error = task.timeout_error("; its process was killed")
    except Exception as exc:
        outcome.error = exc
    outcome.duration = time.perf_counter() - started
    return outcome
