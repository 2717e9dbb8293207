"""examples/durable.py runs as written, and `tasuki inspect` shows a message's durable
steps and what it waits for."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import orjson

import tasuki
from tasuki.backends.base import Envelope, Settle, StepRecord, Wait
from tests.e2e.test_cli import tasuki_cli
from tests.support.processes import env_with_src

ROOT = Path(__file__).resolve().parents[2]


def test_the_durable_example_runs_as_written(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "durable.py")],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env_with_src(),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines.count("creating the account of user 7") == 1  # its step ran once
    assert "waiting for signal 'confirmed'" in lines
    assert "delivered" in lines
    assert "welcoming account 700 (confirmed: True)" in lines
    assert lines[-1].startswith("{'ready': 0, 'in_flight': 0, 'delayed': 0, 'dead': 0")


def test_inspect_shows_steps_and_the_wait(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'durable.db'}"
    app = tasuki.App(url)
    app.backend.enqueue([Envelope("jobs", "d-1", b"x")])
    [d] = app.backend.lease("jobs", 1, 30.0)
    app.backend.record_step(
        d.receipt, StepRecord("create", 1, b'{"account":700}', time.time(), 0.25)
    )
    app.backend.settle([Settle.suspend(d.receipt, 3600.0, Wait("confirmed"))])

    shown = tasuki_cli("inspect", "jobs", "d-1", "--url", url)
    assert shown.returncode == 0, shown.stderr
    for part in ("waiting for signal 'confirmed' until", "create #1", '{"account":700}', "0.250s"):
        assert part in shown.stdout, part
    info = orjson.loads(tasuki_cli("inspect", "jobs", "d-1", "--url", url, "--json").stdout)
    assert info["waiting"].startswith("waiting for signal 'confirmed' until ")
    assert [(s["name"], s["occurrence"], s["result"]) for s in info["steps"]] == [
        ("create", 1, '{"account":700}')
    ]


def test_the_dashboard_shows_steps_and_the_wait(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from tasuki.web import create_app

    app = tasuki.App(f"sqlite:///{tmp_path / 'dash.db'}")
    app.backend.enqueue([Envelope("jobs", "d-2", b"x")])
    [d] = app.backend.lease("jobs", 1, 30.0)
    app.backend.record_step(d.receipt, StepRecord("create", 1, b'{"account":7}', time.time(), 0.5))
    app.backend.settle([Settle.suspend(d.receipt, 3600.0, Wait())])
    with TestClient(create_app(app), base_url="http://127.0.0.1") as client:
        page = client.get("/queues/jobs/messages/d-2")
    assert page.status_code == 200
    assert 'data-field="waiting">sleeping until ' in page.text
    assert 'id="steps"' in page.text and "create #1" in page.text
    assert "{&#34;account&#34;:7}" in page.text  # the result's preview, escaped
