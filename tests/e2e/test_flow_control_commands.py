"""Cancel, priority and progress where operators see them: `tasuki cancel`, `tasuki
inspect` and the dashboard's message page (its cancel button: a POST, confirmed, with
the CSRF token like the other actions). On an SQLite file, which the commands open as
the test does (the CLI refuses memory://: its messages die with the process); on a
backend lacking cancel they refuse."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

import tasuki
from tasuki.backends.base import Keep, Progress
from tasuki.cli.main import cli
from tasuki.web.app import create_app
from tasuki.web.sampler import Sampler
from tests.support.capabilities import without

BASE = "http://127.0.0.1:8181"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / f'cli-{uuid.uuid4().hex[:8]}.db'}"


@pytest.fixture
def app(url: str) -> Iterator[tasuki.App]:
    app = tasuki.App(url)
    caps = app.backend.capabilities
    if not (caps.cancel and caps.priorities and caps.progress):
        app.close()
        pytest.skip("sqlite:// lacks cancel, priorities or progress")
    yield app
    app.close()


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_cancel_command(app: tasuki.App, url: str) -> None:
    @app.job
    def report(n: int) -> None: ...

    running = report.enqueue(1)
    [held] = app.backend.lease("default", 1, 30.0)
    waiting = report.enqueue(2)
    status, out = invoke("cancel", "default", waiting, "--url", url)
    assert (
        status == 0 and out == f"{waiting} in default: removed: it was waiting and will not run\n"
    )
    status, out = invoke("cancel", "default", running, "--url", url)
    assert status == 0 and "signalled: it is running" in out, out
    assert app.backend.keep([Keep(held.receipt, 30.0)]) == ["cancelled"]
    status, out = invoke("cancel", "default", running, "--url", url, "--json")
    assert status == 1
    assert orjson.loads(out) == {"queue": "default", "id": running, "status": "unknown"}
    status, out = invoke("cancel", "default", "nope", "--url", url)
    assert status == 1 and "nothing to cancel" in out


def test_cancel_command_usage_errors(url: str) -> None:
    status, out = invoke("cancel", "", "x", "--url", url)
    assert status == 2 and "queue" in out
    status, out = invoke("cancel", "default", "--url", url)
    assert status == 2 and "MESSAGE_ID" in out


@pytest.fixture
def without_cancel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every backend opened from here on lacks the cancel capability (as sqs:// does),
    whatever the SQLite file could do: the refusals are what is tested."""
    without(monkeypatch, "cancel")


@pytest.mark.usefixtures("without_cancel")
def test_cancel_command_on_a_backend_without_cancel(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    tasuki.App(url).close()  # the file exists: the command refuses for the capability
    status, out = invoke("cancel", "default", "x", "--url", url)
    assert status == 1
    assert "lacks the cancel capability" in out


def test_inspect_shows_priority_progress_and_cancelled(app: tasuki.App, url: str) -> None:
    @app.job(priority=7)
    def pages() -> None: ...

    mid = pages.enqueue()
    [d] = app.backend.lease("default", 1, 30.0)
    app.backend.keep([Keep(d.receipt, 30.0, Progress(0.4, "4 of 10 pages"))])
    status, out = invoke("inspect", "default", mid, "--url", url)
    assert status == 0, out
    assert re.search(r"priority:?\s+│?\s*7", out), out
    assert "40% 4 of 10 pages" in out
    info = orjson.loads(invoke("inspect", "default", mid, "--url", url, "--json")[1])
    assert info["priority"] == 7
    assert info["progress"] == {"fraction": 0.4, "text": "4 of 10 pages"}
    app.cancel("default", mid)
    status, out = invoke("inspect", "default", mid, "--url", url)
    assert status == 0 and "cancelled" in out and "id remembered until" in out


@pytest.fixture
def client(app: tasuki.App) -> Iterator[TestClient]:
    sampler = Sampler(app, every=60.0)
    with TestClient(create_app(app, sampler=sampler), base_url=BASE) as client:
        yield client


def test_the_message_page_shows_priority_and_progress_and_cancels(
    app: tasuki.App, client: TestClient
) -> None:
    @app.job(priority=3)
    def pages() -> None: ...

    mid = pages.enqueue()
    [d] = app.backend.lease("default", 1, 30.0)
    app.backend.keep([Keep(d.receipt, 30.0, Progress(0.5, "half <done>"))])
    page = client.get(f"/queues/default/messages/{mid}").text
    assert re.search(r'data-field="priority">3<', page)
    assert "50% half &lt;done&gt;" in page  # escaped as data
    assert 'id="cancel"' in page
    confirm = client.get(f"/queues/default/confirm?action=cancel&id={mid}").text
    assert "Cancel this message" in confirm
    csrf = re.search(r'name="csrf" value="([^"]+)"', confirm)
    assert csrf is not None
    headers = {"origin": BASE}
    refused = client.post(
        "/queues/default/cancel", data={"id": mid, "confirm": "yes"}, headers=headers
    )
    assert refused.status_code == 403  # no CSRF token
    unconfirmed = client.post(
        "/queues/default/cancel",
        data={"id": mid, "csrf": csrf.group(1)},
        headers=headers,
        follow_redirects=False,
    )
    assert unconfirmed.status_code == 303 and "/confirm?" in unconfirmed.headers["location"]
    assert app.inspect("default", mid).state == "in_flight"  # asking changed nothing
    done = client.post(
        "/queues/default/cancel",
        data={"id": mid, "csrf": csrf.group(1), "confirm": "yes"},
        headers=headers,
    )
    assert done.status_code == 200 and f"cancel {mid}: signalled" in done.text
    assert app.inspect("default", mid).state == "cancelled"
    page = client.get(f"/queues/default/messages/{mid}").text
    assert 'id="cancel"' not in page  # nothing left to cancel


@pytest.mark.usefixtures("without_cancel")
def test_no_cancel_button_where_the_backend_cannot(tmp_path: Path) -> None:
    sqlite = tasuki.App(f"sqlite:///{tmp_path / 'd.db'}")
    mid = sqlite.send("default", b"x")
    with TestClient(create_app(sqlite, sampler=Sampler(sqlite, every=60.0)), base_url=BASE) as c:
        page = c.get(f"/queues/default/messages/{mid}").text
    assert "ready" in page and 'id="cancel"' not in page
    sqlite.close()


def test_enqueue_command_takes_a_priority(app: tasuki.App, url: str, tmp_path: Path) -> None:
    status, out = invoke("enqueue", "resize", "1", "--priority", "7", "--url", url)
    assert status == 0, out
    message_id = out.splitlines()[0]  # then the note that no app checked the name
    assert app.inspect("default", message_id).priority == 7
    status, out = invoke("enqueue", "resize", "1", "--priority", "10", "--url", url)
    assert status == 2 and "--priority" in out
    other = tmp_path / "elsewhere"
    other.mkdir()
    sqlite = f"sqlite:///{other / 'p.db'}"
    probe = tasuki.App(sqlite)
    lacks = not probe.backend.capabilities.priorities
    probe.close()
    if lacks:
        status, out = invoke("enqueue", "resize", "1", "--priority", "7", "--url", sqlite)
        assert status == 1 and "'priorities'" in out, out
    status, out = invoke("enqueue", "resize", "1", "--priority", "0", "--url", sqlite)
    assert status == 0, out
