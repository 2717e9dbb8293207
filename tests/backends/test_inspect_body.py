"""`app.inspect` carries the job and arguments where the backend reads the body back in
the same query (memory, SQLite, PostgreSQL, Redis: `Backend.inspect_body`), decoded as the
console's listings decode them; the dashboard's message page shows them."""

from __future__ import annotations

from pathlib import Path

import pytest

import tasuki
from tests.support.backends import URL_FACTORIES


@pytest.fixture(params=["memory", "sqlite", "postgresql", "redis"])
def app(request: pytest.FixtureRequest, tmp_path: Path) -> tasuki.App:
    return tasuki.App(URL_FACTORIES[request.param](request, tmp_path))


def test_inspect_carries_job_and_arguments(app: tasuki.App) -> None:
    @app.job(queue="billing")
    def bill(amount: int, customer: str = "") -> None: ...

    waiting = bill.options(delay=3600).enqueue(7, customer="acme")
    info = app.inspect("billing", waiting)
    assert (info.state, info.job, info.args, info.kwargs) == (
        "delayed",
        "bill",
        (7,),
        {"customer": "acme"},
    )
    assert app.inspect("billing", "never").job is None
    app.close()


def test_an_unsigned_pickled_body_is_not_decoded(app: tasuki.App) -> None:
    """The message page never unpickles a body it cannot trust: its job, no arguments."""
    pickling = tasuki.App(
        app.url, backend=app.backend, serializer="pickle", allow_unsigned_pickle=True
    )

    @pickling.job(queue="billing")
    def bill(amount: int) -> None: ...

    waiting = bill.options(delay=3600).enqueue(7)
    info = app.inspect("billing", waiting)
    assert (info.job, info.args, info.kwargs) == ("bill", None, None)
    app.close()
