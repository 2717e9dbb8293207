"""`tasuki worker --reload`, run as a developer runs it: edit a file, see the new code run.

The job that is running when the file changes is handed back without penalty before
the worker restarts, and runs again in the new worker, with the new code, at attempt 1.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from tasuki.cli.main import cli
from tasuki.cli.reload import child_argv
from tests.support.deps import need
from tests.support.processes import env_with_src
from tests.worker.helpers import wait_until

need("watchfiles")

MODULE = """
import time

import tasuki

app = tasuki.App("sqlite:///reload.db")
VERSION = 1


def note(line: str) -> None:
    with open("runs.txt", "a") as out:
        out.write(line + "\\n")


@app.job()
def hello(n: int) -> None:
    note(f"hello v{VERSION} n={n} attempt={tasuki.current().attempt}")


@app.job()
def hold() -> None:
    note(f"hold v{VERSION} attempt={tasuki.current().attempt}")
    time.sleep(120)  # not cooperative: only the shutdown's release gets it back
"""


def runs(where: Path) -> list[str]:
    path = where / "runs.txt"
    return path.read_text().splitlines() if path.exists() else []


def enqueue(where: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "tasuki", "enqueue", *args, "--url", "sqlite:///reload.db"],
        cwd=where,
        env=env_with_src(),
        check=True,
        capture_output=True,
        timeout=60,
    )


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    (tmp_path / "reloadme.py").write_text(textwrap.dedent(MODULE))
    env = {**env_with_src(), "PYTHONDONTWRITEBYTECODE": "1"}
    with open(tmp_path / "reload.log", "wb") as log:
        parent = subprocess.Popen(
            [sys.executable, "-m", "tasuki", "worker", "reloadme:app", "--reload", "-c", "2"],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    yield tmp_path, parent
    if parent.poll() is None:
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
    for line in (tmp_path / "reload.log").read_text().splitlines():  # no orphan left behind
        if "reload: worker started (pid " in line:
            kill_if_ours(int(line.rsplit("pid ", 1)[1].rstrip(")")))


def kill_if_ours(pid: int) -> None:
    """SIGKILL a worker this test started, if it still runs (a pid can be reused)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return
    if b"reloadme:app" in cmdline:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_an_edit_restarts_the_worker_on_the_new_code(
    project: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    where, parent = project
    log = where / "reload.log"
    enqueue(where, "hello", "1")
    wait_until(lambda: "hello v1 n=1 attempt=1" in runs(where), timeout=60)
    enqueue(where, "hold")
    wait_until(lambda: "hold v1 attempt=1" in runs(where), timeout=30)

    source = where / "reloadme.py"
    source.write_text(
        source.read_text().replace("VERSION = 1", "VERSION = 2").replace("time.sleep(120)", "pass")
    )
    # The held message was released without penalty, and the new code runs it at once.
    wait_until(lambda: "hold v2 attempt=1" in runs(where), timeout=60)
    text = log.read_text()
    assert "reloadme.py changed" in text
    assert "released on shutdown" in text and "reload: worker exited with status 0" in text
    enqueue(where, "hello", "2")
    wait_until(lambda: "hello v2 n=2 attempt=1" in runs(where), timeout=30)
    assert runs(where).count("hold v1 attempt=1") == 1

    # A mistake in the code: the worker cannot start, the watcher waits for the fix.
    source.write_text(source.read_text().replace("VERSION = 2", "VERSION = 2 +"))
    wait_until(lambda: "waiting for a change to start it again" in log.read_text(), timeout=60)
    assert "SyntaxError" in log.read_text()
    source.write_text(source.read_text().replace("VERSION = 2 +", "VERSION = 3"))
    wait_until(lambda: log.read_text().count("reload: worker started") == 3, timeout=60)
    enqueue(where, "hello", "3")
    wait_until(lambda: "hello v3 n=3 attempt=1" in runs(where), timeout=30)

    parent.send_signal(signal.SIGTERM)  # stops the worker gracefully, then itself
    assert parent.wait(30) == 0
    assert log.read_text().rstrip().endswith("0 released on shutdown")


def test_the_child_gets_the_same_command_without_reload() -> None:
    worker = cli.get_command(click.Context(cli), "worker")
    assert worker is not None
    args = [
        "myapp:app", "-q", "a,b", "--no-inline", "--reload", "--reload-dir", ".",
        "--log-format", "json", "--health-port", "8080",
    ]  # fmt: skip
    ctx = worker.make_context("worker", args, parent=click.Context(cli, info_name="tasuki"))
    argv = child_argv(ctx, grace=1.0)
    assert argv[:4] == [sys.executable, "-m", "tasuki", "worker"]
    rest = argv[4:]
    assert rest[0] == "myapp:app"
    assert "--queues=a,b" in rest and "--no-inline" in rest and "--grace=1.0" in rest
    assert "--log-format=json" in rest and "--health-port=8080" in rest
    assert not any(a.startswith("--reload") for a in rest)
    assert "--no-scheduler" not in rest
    # What the child gets parses back to the same options.
    again = worker.make_context("worker", rest, parent=click.Context(cli, info_name="tasuki"))
    for name, value in ctx.params.items():
        if name not in {"reload", "reload_dirs", "grace"}:
            assert again.params[name] == value, name
