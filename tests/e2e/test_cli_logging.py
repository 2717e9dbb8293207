"""`tasuki worker` and the user's own logging: the app's configuration or `--log-config`."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

import tasuki
from tests.e2e.test_cli import ROOT, tasuki_cli
from tests.e2e.test_cli_errors import USAGE, assert_one_line_error
from tests.support.processes import env_with_src

APP = "tests.e2e.logging_app:app"

JSON_CONFIG = {
    "version": 1,
    "formatters": {"f": {"format": "from-config %(levelname)s %(message)s"}},
    "handlers": {"file": {"class": "logging.FileHandler", "filename": "{log}", "formatter": "f"}},
    "loggers": {"tasuki": {"handlers": ["file"], "level": "INFO"}},
}
INI_CONFIG = """\
[loggers]
keys=root,tasuki
[handlers]
keys=file
[formatters]
keys=f
[logger_root]
handlers=
[logger_tasuki]
qualname=tasuki
handlers=file
level=INFO
[handler_file]
class=FileHandler
formatter=f
args=('{log}',)
[formatter_f]
format=from-config %(levelname)s %(message)s
"""


def run_worker(
    url: str, log: Path, *args: str, app_log: Path | None = None
) -> tuple[str, str, str]:
    """Run a worker until its failing job is dead-lettered: (the message's id, the
    worker's stderr, the log file). The app logs to `app_log`, by default `log`."""
    producer = tasuki.App(url)

    @producer.job(retry=tasuki.Retry(max_attempts=1))
    def fail(n: int) -> None: ...

    msg_id = fail.enqueue(7)
    producer.close()
    env = env_with_src()
    env.update(TASUKI_URL=url, TASUKI_TEST_LOGFILE=str(app_log or log))
    err = log.with_name("stderr.txt")

    def logged() -> str:
        return "".join(p.read_text() for p in (log, err) if p.exists())

    with err.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tasuki", "worker", APP, "-c", "1", *args],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    try:
        deadline = time.monotonic() + 30
        while "dead-lettered queue" not in logged() and '"dead-lettered"' not in logged():
            assert proc.poll() is None, logged()
            assert time.monotonic() < deadline, "no dead letter logged"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, logged()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return msg_id, err.read_text(), log.read_text() if log.exists() else ""


def test_the_apps_own_logging_is_left_as_it_is(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    msg_id, stderr, text = run_worker(f"sqlite:///{tmp_path}/q.db", log)
    assert "worker started" not in stderr and "dead-lettered" not in stderr
    [line] = [x for x in text.splitlines() if "dead-lettered" in x]
    assert line.startswith(f"app-format ERROR dead-lettered queue=default job=fail id={msg_id}")
    assert 'error="ValueError: no such order 7"' in line


def test_an_explicit_log_format_still_applies(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    msg_id, stderr, text = run_worker(f"sqlite:///{tmp_path}/q.db", log, "--log-format", "json")
    [line] = [x for x in stderr.splitlines() if '"dead-lettered"' in x]
    doc = orjson.loads(line)
    assert doc["event"] == "dead-lettered" and doc["job"] == "fail" and doc["id"] == msg_id
    assert "dead-lettered" not in text


@pytest.mark.parametrize("kind", ["json", "yaml", "ini"])
def test_log_config_file(tmp_path: Path, kind: str) -> None:
    log = tmp_path / "worker.log"
    config = tmp_path / f"logging.{kind}"
    if kind == "ini":
        config.write_text(INI_CONFIG.replace("{log}", str(log)))
    else:
        doc = orjson.loads(orjson.dumps(JSON_CONFIG).replace(b"{log}", str(log).encode()))
        # JSON is a subset of YAML: the same document serves both.
        config.write_bytes(orjson.dumps(doc))
    msg_id, stderr, text = run_worker(
        f"sqlite:///{tmp_path}/q.db",
        log,
        "--log-config",
        str(config),
        "--log-format",
        "json",
        app_log=tmp_path / "app.log",
    )
    assert "worker started" not in stderr
    assert "from-config INFO worker started" in text
    [line] = [x for x in text.splitlines() if "dead-lettered" in x]
    assert line.startswith(f"from-config ERROR dead-lettered queue=default job=fail id={msg_id}")


def test_a_broken_log_config_is_one_usage_line(tmp_path: Path) -> None:
    config = tmp_path / "logging.json"
    config.write_text('{"version": 1, "handlers": {"h": {"class": "no.such.Handler"}}}')
    result = tasuki_cli("worker", "tests.e2e.cli_app:app", "--log-config", str(config))
    assert_one_line_error(result, USAGE, "--log-config", "no.such")
