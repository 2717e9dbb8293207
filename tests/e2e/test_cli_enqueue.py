"""`tasuki enqueue` checks the job's name and takes its queue when it knows the app."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tasuki
from tests.e2e.test_cli import ROOT
from tests.support.processes import env_with_src

APP = "tests.e2e.cli_app:app"


def enqueue(url: str, *args: str, app: str | None = None) -> subprocess.CompletedProcess[str]:
    env = env_with_src()
    env["TASUKI_URL"] = url
    env.pop("TASUKI_APP", None)
    if app is not None:
        env["TASUKI_APP"] = app
    return subprocess.run(
        [sys.executable, "-m", "tasuki", "enqueue", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_tasuki_app_checks_the_name_and_uses_the_jobs_queue(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    result = enqueue(url, "resize", "42", app=APP)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    app = tasuki.App(url)
    assert app.stats("images")["ready"] == 1 and app.stats("default")["ready"] == 0
    [delivery] = app.backend.lease("images", 1, 30.0)
    assert delivery.id == result.stdout.strip()
    app.close()
    typo = enqueue(url, "resise", "42", app=APP)
    assert typo.returncode == 1 and "did you mean 'resize'?" in typo.stderr


def test_without_an_app_it_says_the_name_was_not_checked(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    result = enqueue(url, "resise", "42")
    assert result.returncode == 0, result.stderr
    msg_id = result.stdout.strip()
    assert msg_id and "\n" not in msg_id, "stdout is the id alone, for scripts"
    assert "'resise' was not checked" in result.stderr
    assert "queue 'default'" in result.stderr and "--app" in result.stderr
