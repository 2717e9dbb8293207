"""tasuki.testing for the tests of an app: drain(), use_memory() and the pytest fixtures."""

from __future__ import annotations

import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import tasuki
from tasuki.errors import DeadLettered, DrainTimeout, InvalidArgument
from tasuki.testing import drain, use_memory
from tests.support.processes import env_with_src


class Boom(Exception):
    pass


def fast_retry(attempts: int) -> tasuki.Retry:
    return tasuki.Retry(max_attempts=attempts, backoff=tasuki.constant(0.01))


def test_drain_runs_every_job_and_says_what_ran(tasuki_app: tasuki.App) -> None:
    @tasuki_app.job
    def add(a: int, b: int) -> int:
        return a + b

    @tasuki_app.job(queue="other")
    def shout(word: str) -> str:
        return word.upper()

    add.enqueue_many([(1, 2), (3, 4)])
    shout.enqueue("hey")
    drained = drain(tasuki_app)
    assert sorted(drained.results("add")) == [3, 7]
    assert drained.results("shout") == ["HEY"]
    assert [run.action for run in drained.runs] == ["ack"] * 3
    assert drained.failures == () and drained.dead == ()
    assert tasuki_app.stats("default")["ready"] == tasuki_app.stats("other")["ready"] == 0


def test_drain_of_some_queues_leaves_the_others(tasuki_app: tasuki.App) -> None:
    @tasuki_app.job(queue="a")
    def first() -> None: ...

    @tasuki_app.job(queue="b")
    def second() -> None: ...

    first.enqueue()
    second.enqueue()
    assert [run.message.job for run in drain(tasuki_app, "a").runs] == ["first"]
    assert tasuki_app.stats("b")["ready"] == 1


def test_the_first_job_error_is_raised_with_its_traceback(tasuki_app: tasuki.App) -> None:
    @tasuki_app.job(retry=fast_retry(3))
    def charge(order: int) -> None:
        raise Boom(f"card declined for order {order}")

    message_id = charge.enqueue(7)
    with pytest.raises(Boom, match="card declined for order 7") as raised:
        drain(tasuki_app)
    frames = [frame.name for frame in traceback.extract_tb(raised.value.__traceback__)]
    assert "charge" in frames  # the job's own frame, where it raised
    # It stopped there: the message waits for its retry, as it would in production.
    info = tasuki_app.inspect("default", message_id)
    assert (info.state, info.attempt) in {("delayed", 1), ("ready", 1)}


def test_an_async_job_error_is_raised_too(tasuki_app: tasuki.App) -> None:
    @tasuki_app.job(retry=fast_retry(1))
    async def fetch(url: str) -> None:
        raise Boom(f"no answer from {url}")

    fetch.enqueue("https://example.invalid")
    with pytest.raises(Boom, match="no answer"):
        drain(tasuki_app)


def test_without_raising_the_drain_goes_on_through_retries(tasuki_app: tasuki.App) -> None:
    calls: list[int] = []

    @tasuki_app.job(retry=fast_retry(2))
    def flaky() -> None:
        calls.append(tasuki.current().attempt)
        raise Boom("always")

    @tasuki_app.job
    def fine() -> str:
        return "ok"

    flaky.enqueue()
    fine.enqueue()
    drained = drain(tasuki_app, raise_errors=False)
    assert calls == [1, 2]
    assert [(run.message.job, run.action) for run in drained.failures] == [
        ("flaky", "retry"),
        ("flaky", "dead"),
    ]
    assert all(isinstance(run.error, Boom) for run in drained.failures)
    assert drained.results() == ["ok"]
    [dead] = drained.dead
    assert dead.job == "flaky" and str(dead.error).startswith("Boom: always")


def test_deferred_runs_are_not_failures(tasuki_app: tasuki.App) -> None:
    runs: list[int] = []

    @tasuki_app.job
    def patient() -> str:
        runs.append(tasuki.current().attempt)
        if len(runs) == 1:
            raise tasuki.Defer(0.01)
        return "done"

    patient.enqueue()
    drained = drain(tasuki_app)
    assert [run.action for run in drained.runs] == ["defer", "ack"]
    assert drained.results() == ["done"]
    assert runs == [1, 1]  # a deferral gives its attempt back


def test_a_dead_letter_without_a_run_is_raised(tasuki_app: tasuki.App) -> None:
    @tasuki_app.job
    def known() -> None: ...

    tasuki_app.send("default", b"{}", headers={"tasuki-job": "renamed_last_week"})
    with pytest.raises(DeadLettered, match="unknown job 'renamed_last_week'"):
        drain(tasuki_app)
    # Seen once: a later drain does not report it again.
    assert drain(tasuki_app).dead == ()


def test_a_dead_letter_without_a_run_is_listed_when_not_raising(
    tasuki_app: tasuki.App,
) -> None:
    tasuki_app.send("raw", b"nobody reads this")
    [dead] = drain(tasuki_app, "raw", raise_errors=False).dead
    assert "no consumer for raw messages" in dead.reason


def test_a_queue_that_never_empties_times_out(tasuki_app: tasuki.App) -> None:
    @tasuki_app.job
    def later() -> None: ...

    later.options(delay=60.0).enqueue()
    with pytest.raises(DrainTimeout, match=r"queue 'default' holds 0 ready, 0 in flight, 1 del"):
        drain(tasuki_app, timeout=0.3)
    with pytest.raises(InvalidArgument, match="timeout"):
        drain(tasuki_app, timeout=0)


def test_use_memory_puts_an_app_on_a_fresh_store_and_back(tmp_path: Path) -> None:
    app = tasuki.App(f"sqlite:///{tmp_path / 'prod.db'}")
    own = app.backend

    @app.job(dedup=True)
    def send_mail(to: str) -> None: ...

    with use_memory(app):
        assert app.backend is not own and app.url.startswith("memory://")
        assert app.locks is app.backend.locks
        send_mail.enqueue("ada@example.com")
        assert drain(app).results() == [None]
    assert app.backend is own and app.url == own.url
    assert own.stats("default").ready == 0  # nothing reached the real store
    send_mail.enqueue("grace@example.com")
    assert own.stats("default").ready == 1
    app.close()


@pytest.fixture
def prod_app(tmp_path: Path) -> Iterator[tasuki.App]:
    """An app on its own SQLite file; after the test, it must be back on it."""
    app = tasuki.App(f"sqlite:///{tmp_path / 'prod.db'}")
    own = app.backend
    yield app
    assert app.backend is own and app.url == own.url
    app.close()


def test_tasuki_memory_swaps_for_one_test(
    prod_app: tasuki.App, tasuki_memory: Callable[[tasuki.App], tasuki.App]
) -> None:
    @prod_app.job
    def ping() -> str:
        return "pong"

    assert tasuki_memory(prod_app) is prod_app
    assert prod_app.url.startswith("memory://")
    ping.enqueue()
    assert drain(prod_app).results() == ["pong"]


IMPORTS = """
import importlib, sys
import tasuki
assert "pytest" not in sys.modules, "import tasuki imported pytest"
assert "tasuki.testing" not in sys.modules, "import tasuki imported tasuki.testing"
sys.modules["pytest"] = None  # as if pytest were not installed
from tasuki.testing import FaultyBackend, drain, use_memory
try:
    importlib.import_module("tasuki.testing.contract")
except ImportError:
    pass
else:
    raise SystemExit("the contract suite imported without pytest")
"""


def test_import_tasuki_loads_neither_pytest_nor_the_testing_package() -> None:
    """And drain() works where pytest is not installed; only the suite needs it."""
    result = subprocess.run(
        [sys.executable, "-c", IMPORTS],
        env=env_with_src(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
