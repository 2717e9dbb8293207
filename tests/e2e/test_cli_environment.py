"""`tasuki worker` configured from the environment, and shell completion, as documented."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.test_cli import ROOT
from tests.support.processes import env_with_src


def start(
    tmp_path: Path, env_extra: dict[str, str], *args: str
) -> tuple[subprocess.Popen[bytes], Path]:
    env = env_with_src()
    env.update(TASUKI_URL=f"sqlite:///{tmp_path / 'q.db'}", TASUKI_TEST_LOG=str(tmp_path / "r"))
    env.update(env_extra)
    err = tmp_path / "stderr.txt"
    with err.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tasuki", "worker", *args],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    return proc, err


def wait_for(proc: subprocess.Popen[bytes], err: Path, text: str, count: int = 1) -> str:
    deadline = time.monotonic() + 30
    while err.read_text().count(text) < count:
        assert proc.poll() is None, err.read_text()
        assert time.monotonic() < deadline, err.read_text()
        time.sleep(0.05)
    return err.read_text()


def stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_every_worker_option_comes_from_the_environment(tmp_path: Path) -> None:
    env = {
        "TASUKI_APP": "tests.worker.sample_app:app",
        "TASUKI_CONCURRENCY": "3",
        "TASUKI_QUEUES": "alpha,beta",
        "TASUKI_LOG_FORMAT": "json",
        "TASUKI_NO_SCHEDULER": "1",
    }
    proc, err = start(tmp_path, env)
    text = wait_for(proc, err, "worker started")
    assert '"event":"worker started: queues=alpha,beta concurrency=3' in text, text
    assert stop(proc) == 0


def test_the_command_line_wins_and_children_do_not_read_the_group_options(
    tmp_path: Path,
) -> None:
    env = {"TASUKI_APP": "tests.worker.sample_app:app", "TASUKI_CONCURRENCY": "3"}
    env["TASUKI_WORKERS"] = "2"
    proc, err = start(tmp_path, env, "-c", "2")
    text = wait_for(proc, err, "worker started: queues", count=2)
    time.sleep(1.0)  # a child that read TASUKI_WORKERS would start children of its own
    text = err.read_text()
    assert text.count("worker started: queues") == 2, text
    assert text.count(" concurrency=2 backend=") == 2, text
    assert stop(proc) == 0


def complete(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tasuki"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_shell_completion_completes_commands_and_options() -> None:
    env = env_with_src()
    env.update(_TASUKI_COMPLETE="bash_complete", COMP_WORDS="tasuki wor", COMP_CWORD="1")
    done = complete(env)
    assert "plain,worker" in done.stdout.splitlines(), done
    env.update(COMP_WORDS="tasuki worker --conc", COMP_CWORD="2")
    done = complete(env)
    assert "plain,--concurrency" in done.stdout.splitlines(), done
