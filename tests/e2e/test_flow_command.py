"""`tasuki flow FLOW_ID`: a flow as an operator reads it (its state, where it failed, each
step), and a backend without workflows refused in one line."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import tasuki
from tasuki.cli.flow import as_document, render
from tasuki.cli.main import cli
from tests.support.capabilities import without


def test_a_failed_flow_reads_from_the_top() -> None:
    app = tasuki.App("memory://")

    @app.job()
    def fetch(url: str) -> str:
        return url

    @app.job(retry=tasuki.Retry(max_attempts=1))
    def parse(page: str) -> None:
        raise ValueError(f"cannot parse {page}")

    @app.job()
    def store(rows: list[str]) -> None: ...

    flow_id = tasuki.chain(fetch.step("a.io"), parse.step(), store.step()).enqueue()
    app.worker(concurrency=2).run(until_idle=True, timeout=30.0)
    state = app.flow(flow_id)
    lines = render(state).splitlines()
    assert lines[0] == f"flow {flow_id}: failed"
    assert lines[1].startswith(f"failed at step 1 (parse on default, {flow_id}.1): ValueError")
    assert any("raise ValueError" in line for line in lines)
    table = lines[lines.index("") + 1 :]
    assert table[0].split() == ["job", "queue", "message", "id", "state", "attempt"]
    assert [row.split()[0] for row in table[1:]] == ["fetch", "parse", "store"]
    assert [row.split()[3] for row in table[1:]] == ["finished", "dead", "unknown"]
    doc = orjson.loads(orjson.dumps(as_document(state)))
    assert doc["state"] == "failed" and doc["error"]["step"] == "1"
    assert [s["job"] for s in doc["steps"]] == ["fetch", "parse", "store"]
    app.close()


def test_an_unknown_flow_is_answered_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    tasuki.App(url).close()
    result = CliRunner().invoke(cli, ["flow", "some-flow", "--url", url])
    assert result.exit_code == 4, result.output


def test_a_backend_without_workflows_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    tasuki.App(url).close()
    without(monkeypatch, "workflows")
    result = CliRunner().invoke(cli, ["flow", "some-flow", "--url", url])
    assert result.exit_code == 1 and "lacks the workflows capability" in result.output, (
        result.output
    )
    assert result.output.count("\n") == 1


def test_inspect_names_the_flow_a_step_belongs_to(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    app = tasuki.App(url)

    @app.job()
    def fetch(url: str) -> str:
        return url

    @app.job()
    def store(page: str) -> None: ...

    # A flow id with a dot and digits of its own: the record says which reading is true.
    flow_id = tasuki.chain(fetch.step("a.io"), store.step()).options(message_id="v1.2").enqueue()
    info = app.inspect("default", f"{flow_id}.0")
    assert (info.flow_id, info.step) == ("v1.2", "0")
    assert info.as_dict()["flow"] == {"id": "v1.2", "step": "0"}
    assert app.inspect("default", f"{flow_id}.1").flow_id is None  # not enqueued yet
    plain = app.jobs["fetch"].options(message_id="v1.2.3").enqueue("x")
    assert app.inspect("default", plain).flow_id is None  # reads like a step, is none
    out = CliRunner().invoke(cli, ["inspect", "default", f"{flow_id}.0", "--url", url]).output
    assert "flow" in out and "v1.2, step 0" in out, out
    app.close()
