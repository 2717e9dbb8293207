"""`tasuki result QUEUE ID` as an operator uses it: the value as JSON, and a distinct exit
status for each of the three other answers (failed 1, pending 3, missing 4); refused
with one line on a backend that keeps no results."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from click.testing import CliRunner

import tasuki
from tasuki.cli.main import cli
from tests.support.capabilities import without


@pytest.fixture
def app(shared_url: str) -> Iterator[tasuki.App]:
    app = tasuki.App(shared_url)
    yield app
    app.close()


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_each_answer_has_its_exit_status(app: tasuki.App) -> None:
    if not app.backend.capabilities.results:
        pytest.skip(f"{app.backend.url.split(':', 1)[0]}:// lacks the results capability")
    url = app.backend.url

    @app.job(keep_result=60.0, retry=tasuki.Retry(max_attempts=1))
    def add(a: int, b: int) -> dict[str, int]:
        if a < 0:
            raise ValueError("negative")
        return {"sum": a + b}

    done, failed = add.enqueue(1, 2), add.enqueue(-1, 2)
    later = add.options(delay=60).enqueue(5, 5)
    app.worker(concurrency=2).run(until_idle=True, timeout=30)

    code, out = invoke("result", "default", done, "--url", url)
    assert (code, orjson.loads(out)) == (0, {"sum": 3})
    code, out = invoke("result", "default", done, "--url", url, "--json")
    assert orjson.loads(out) == {"queue": "default", "id": done, "state": "ok", "value": {"sum": 3}}
    code, out = invoke("result", "default", failed, "--url", url)
    assert code == 1 and "ValueError: negative" in out
    code, out = invoke("result", "default", later, "--url", url, "--timeout", "0.2")
    assert code == 3 and "no result" in out
    code, out = invoke("result", "default", "never-enqueued", "--url", url, "--json")
    assert code == 4 and orjson.loads(out)["state"] == "missing"


def test_a_backend_without_results_is_refused_in_one_line(
    app: tasuki.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    without(monkeypatch, "results")
    code, out = invoke("result", "default", "some-id", "--url", app.backend.url)
    assert code == 1
    assert out.count("\n") == 1 and "results" in out, out


def test_inspect_shows_the_kept_result(app: tasuki.App) -> None:
    caps = app.backend.capabilities
    if not (caps.results and caps.inspection):
        pytest.skip(f"{app.backend.url.split(':', 1)[0]}:// lacks results or inspection")
    url = app.backend.url

    @app.job(keep_result=60.0)
    def double(n: int) -> int:
        return 2 * n

    mid = double.enqueue(21)
    app.worker(concurrency=1).run(until_idle=True, timeout=30)
    code, out = invoke("inspect", "default", mid, "--url", url, "--json")
    assert code == 0, out  # acked and perhaps forgotten, but its result is kept
    doc = orjson.loads(out)
    assert doc["result"]["value"] == 42 and doc["state"] == "finished"
    code, out = invoke("inspect", "default", mid, "--url", url)
    assert code == 0 and "result" in out and "42" in out, out
    assert "unknown" not in out and "never enqueued" not in out, "one state per message"
