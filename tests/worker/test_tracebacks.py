"""A failed job's traceback starts at the job's own frames, tasuki's above collapsed."""

from __future__ import annotations

import io
import logging

import pytest

import tasuki
from tasuki import logs


def fails_deep(n: int) -> None:
    raise ValueError(f"no order {n}")


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_dead_letters_traceback_starts_at_the_job(kind: str) -> None:
    app = tasuki.App("memory://")
    out, theirs = io.StringIO(), io.StringIO()
    handler, user_handler = logging.StreamHandler(out), logging.StreamHandler(theirs)
    handler.setFormatter(logs.PlainFormatter())
    user_handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logs.logger.addHandler(handler)
    logs.logger.addHandler(user_handler)

    if kind == "sync":

        @app.job(name="order", retry=tasuki.Retry(max_attempts=1))
        def order(n: int) -> None:
            fails_deep(n)
    else:

        @app.job(name="order", retry=tasuki.Retry(max_attempts=1))
        async def order(n: int) -> None:
            fails_deep(n)

    try:
        order.enqueue(7)
        app.worker(concurrency=1).run(until_idle=True, timeout=30)
    finally:
        logs.logger.removeHandler(handler)
        logs.logger.removeHandler(user_handler)
    [dead] = app.dead_letters()
    assert dead.error is not None
    lines = dead.error.traceback.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[1] == "  [1 frame of tasuki]"
    assert lines[2].startswith('  File "') and lines[2].endswith(", in order")
    assert "tasuki/runtime" not in dead.error.traceback
    assert lines[-1] == "ValueError: no order 7"
    # The worker's own dead-lettered line carries the same traceback, once, under
    # tasuki's format and under a plain logging.Formatter.
    for logged in (out.getvalue(), theirs.getvalue()):
        assert "dead-lettered queue=default job=order" in logged
        assert logged.count("Traceback (most recent call last):") == 1
        assert "  [1 frame of tasuki]\n" in logged and "tasuki/runtime" not in logged
    app.close()


def test_an_error_of_tasukis_own_keeps_its_frames() -> None:
    try:
        tasuki.App("nonsense://")
    except tasuki.TasukiError as exc:
        text = logs.job_traceback(exc)
    assert "[" not in text.splitlines()[1] and "tasuki" in text
