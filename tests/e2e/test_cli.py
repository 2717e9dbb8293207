"""The command line, run as a user would run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

import tasuki
from tasuki.backends.base import Envelope, Settle
from tasuki.testing.servers import MotoServer
from tests.support.processes import env_with_src

ROOT = Path(__file__).resolve().parents[2]


def tasuki_cli(
    *args: str, cwd: Path | None = None, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    env = env_with_src()
    env["COLUMNS"] = "200"  # tables wide enough that no cell wraps
    return subprocess.run(
        [sys.executable, "-m", "tasuki", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or ROOT,
        timeout=timeout,
    )


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    result = tasuki_cli("demo", "--db", str(db))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "worker went idle" in out
    assert "dead letters (7)" in out
    for reason in ("retries exhausted after 3 attempts", "gave up on KeyError", "unknown job"):
        assert reason in out
    app = tasuki.App(f"sqlite:///{db}")
    assert app.stats("demo") == {
        "ready": 0,
        "in_flight": 0,
        "delayed": 0,
        "dead": 7,
        "oldest_ready_age": 0.0,
    }


@pytest.mark.slow
def test_demo_runs_on_the_local_sqs_server(sqs_server: MotoServer, tmp_path: Path) -> None:
    url = (
        f"sqs://us-east-1?endpoint_url={sqs_server.endpoint}&prefix=demo{tmp_path.name[-6:]}-"
        f"&locks=sqlite:///{tmp_path / 'locks.db'}"
    )
    result = tasuki_cli("demo", "--url", url)  # the dummy credentials are in the env
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "worker went idle" in out
    assert "dead letters (7)" in out
    app = tasuki.App(url)
    stats = app.stats("demo")
    app.close()
    assert (stats["ready"], stats["in_flight"], stats["delayed"], stats["dead"]) == (0, 0, 0, 7)


def test_operating_commands(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ops.db'}"
    enq = tasuki_cli("enqueue", "resize", "42", "--id", "img-42", "--url", url)
    assert enq.returncode == 0, enq.stderr
    assert enq.stdout.strip() == "img-42"
    assert (
        tasuki_cli("enqueue", "resize", "42", "--id", "img-42", "--url", url).stdout.strip()
        == "img-42"
    )
    stats = tasuki_cli("stats", "default", "--json", "--url", url)
    assert orjson.loads(stats.stdout)["default"]["ready"] == 1

    app = tasuki.App(url)
    [d] = app.backend.lease("default", 1, 30.0)
    from tasuki.backends.base import Settle
    from tasuki.core.message import ErrorInfo

    app.backend.settle([Settle.dead(d.receipt, "testing", ErrorInfo("RuntimeError", "boom", "tb"))])
    listed = tasuki_cli("dead", "list", "default", "--json", "--url", url)
    [letter] = orjson.loads(listed.stdout)
    assert (letter["id"], letter["reason"], letter["error"]) == (
        "img-42",
        "testing",
        "RuntimeError: boom",
    )
    shown = orjson.loads(
        tasuki_cli("dead", "show", "default", "img-42", "--json", "--url", url).stdout
    )
    assert shown["traceback"] == "tb" and shown["job"] == "resize"
    assert tasuki_cli("dead", "show", "default", "nope", "--url", url).returncode != 0
    assert "re-drove 1" in tasuki_cli("dead", "redrive", "default", "--all", "--url", url).stdout
    assert app.stats()["ready"] == 1
    assert tasuki_cli("dead", "redrive", "default", "--url", url).returncode != 0  # ids or --all
    assert "purged 1" in tasuki_cli("purge", "default", "--yes", "--url", url).stdout


def test_bad_input_gets_one_clear_line(tmp_path: Path) -> None:
    result = tasuki_cli("stats", "--url", "bogus://x")
    assert result.returncode == 1
    assert "unsupported backend URL scheme 'bogus'" in result.stderr
    assert "Traceback" not in result.stderr
    missing = tasuki_cli("worker", "no_such_module:app")
    assert missing.returncode != 0
    assert "cannot import 'no_such_module'" in missing.stderr


def test_module_entry_point_and_help() -> None:
    result = tasuki_cli("--help")
    assert result.returncode == 0
    for command in ("worker", "stats", "dead", "enqueue", "demo", "purge"):
        assert command in result.stdout


def test_inspect_command(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'inspect.db'}"
    app = tasuki.App(url)
    app.backend.enqueue([Envelope("mail", "msg-1", b"hello", max_attempts=3)])
    [d] = app.backend.lease("mail", 1, 30.0)
    trace = "Traceback (most recent call last):\nKeyError: 'to'\n"
    app.backend.settle(
        [Settle.dead(d.receipt, "gave up", tasuki.ErrorInfo("KeyError", "'to'", trace))]
    )

    shown = tasuki_cli("inspect", "mail", "msg-1", "--url", url)
    assert shown.returncode == 0, shown.stderr
    for part in ("dead", "1 of 3", "gave up", "KeyError: 'to'", "Traceback (most recent"):
        assert part in shown.stdout

    as_json = tasuki_cli("inspect", "mail", "msg-1", "--url", url, "--json")
    assert as_json.returncode == 0, as_json.stderr
    info = orjson.loads(as_json.stdout)
    assert (info["state"], info["attempt"], info["fencing_token"]) == ("dead", 1, d.fencing_token)
    assert [h["event"] for h in info["history"]] == ["dead"]

    missing = tasuki_cli("inspect", "mail", "nope", "--url", url, "--json")
    assert missing.returncode == 1
    assert orjson.loads(missing.stdout)["state"] == "unknown"
    bad = tasuki_cli("inspect", "mail", "x", "--url", f"sqlite:///{tmp_path / 'absent.db'}")
    assert bad.returncode == 1 and bad.stderr.startswith("Error:")
