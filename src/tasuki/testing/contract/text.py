"""Hostile text: any `str` a job puts in an error or progress note is stored (made
storable on the way: `tasuki.core.text`), and a name some engine cannot key on (NUL, a
lone surrogate) is refused at enqueue with `InvalidArgument`, storing nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import tasuki
from tasuki.backends.base import Backend, Keep, Progress, Settle
from tasuki.core.message import ErrorInfo
from tasuki.core.text import storable
from tasuki.errors import InvalidArgument
from tasuki.testing.contract.helpers import env, stats

HOSTILE = "nul\x00 lone\ud800 high\udfff bell\x07 café \u2028 end"
SAFE = storable(HOSTILE)


def _raising(error: BaseException) -> ErrorInfo:
    try:
        raise error
    except BaseException as exc:
        return ErrorInfo.from_exception(exc)


class TestHostileText:
    def test_a_dead_letter_keeps_the_real_error_whatever_its_text(
        self, backend: Backend, queue: str
    ) -> None:
        backend.enqueue([env(queue, "poison")])
        [d] = backend.lease(queue, 1, 30.0)
        info = _raising(RuntimeError(HOSTILE))
        assert backend.settle([Settle.dead(d.receipt, f"failed: {HOSTILE}", info)]) == [True]
        letter = backend.dead_letter(queue, "poison")
        assert letter is not None and letter.error is not None
        assert letter.error.type == "RuntimeError"
        assert letter.error.message == SAFE
        assert letter.reason == f"failed: {SAFE}"
        assert SAFE in letter.error.traceback

    def test_a_retry_and_a_progress_note_with_any_text_are_stored(
        self, backend: Backend, queue: str
    ) -> None:
        backend.enqueue([env(queue, "noisy")])
        [d] = backend.lease(queue, 1, 30.0)
        if backend.capabilities.progress:
            [status] = backend.keep([Keep(d.receipt, 30.0, Progress(0.5, storable(HOSTILE)))])
            assert status == "held"
        error = ErrorInfo("ValueError", HOSTILE)
        assert backend.settle([Settle.release(d.receipt, 0.0, error=error)]) == [True]
        [again] = backend.lease(queue, 1, 30.0)
        assert again.id == "noisy"
        assert backend.settle([Settle.ack(again.receipt)]) == [True]

    @pytest.mark.parametrize("bad", ["a\x00b", "lone\ud800"], ids=["nul", "surrogate"])
    def test_names_no_engine_can_store_are_refused_at_enqueue(
        self, backend: Backend, queue: str, bad: str
    ) -> None:
        app = tasuki.App(backend.url, backend=backend)

        @app.job(queue=queue)
        def work(n: int) -> None: ...

        attempts: list[Callable[[], object]] = [
            lambda: work.options(message_id=bad).enqueue(1),
            lambda: app.send(queue, b"{}", message_id=bad),
            lambda: app.send(bad, b"{}"),
            lambda: app.send(queue, b"{}", headers={"x": bad}),
            lambda: app.send(queue, b"{}", headers={bad: "x"}),
            lambda: app.job(name=f"job-{bad}")(lambda: None),
        ]
        for attempt in attempts:
            with pytest.raises(InvalidArgument):
                attempt()
        assert stats(backend, queue) == (0, 0, 0, 0)

    @pytest.mark.parametrize(
        "header",
        [
            {"tasuki-not-before": "nan"},
            {"tasuki-not-before": "inf"},
            {"tasuki-job": ""},
            {"tasuki-signature": "forged"},
            {"tasuki-group": "g" * 1000},
        ],
        ids=["nan", "inf", "empty-job", "signature", "huge-group"],
    )
    def test_tasuki_headers_no_worker_would_believe_are_refused_at_enqueue(
        self, backend: Backend, queue: str, header: dict[str, str]
    ) -> None:
        app = tasuki.App(backend.url, backend=backend)
        with pytest.raises(InvalidArgument, match="bad header tasuki-"):
            app.send(queue, b"{}", headers=header)
        assert stats(backend, queue) == (0, 0, 0, 0)
