"""The command line's wrong turns: every mistake gets one clear line and the right status.

Usage mistakes (a bad option value, a missing argument) exit with status 2, failures at
run time (an unreachable server, an unknown job, a missing database) with status 1, and
neither prints a traceback. Messages print as written, brackets included.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import tasuki
from tasuki.backends import urls
from tasuki.backends.base import Settle
from tasuki.cli.main import cli
from tasuki.core.message import ErrorInfo
from tasuki.testing.servers import free_port
from tests.e2e.test_cli import ROOT, tasuki_cli
from tests.support.processes import env_with_src

USAGE, RUNTIME = 2, 1
APP = "tests.e2e.cli_app:app"


def assert_one_line_error(
    result: subprocess.CompletedProcess[str], status: int, *needles: str
) -> None:
    """Exit `status`, no traceback, and exactly one `Error:` line that says the problem."""
    stderr = result.stderr
    assert result.returncode == status, (result.returncode, stderr, result.stdout)
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, stderr
    if status == RUNTIME:  # no usage banner: the one line is all there is
        assert stderr.strip() == errors[0], stderr
    for needle in needles:
        assert needle in errors[0], stderr


@pytest.fixture(scope="module")
def dead_port() -> Iterator[int]:
    """A local port where nothing listens."""
    yield free_port()


@pytest.fixture
def mem(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cli.db'}"


# -- tasuki enqueue ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "status", "needle"),
    [
        (["resize", "--kwargs", "{bad json"], USAGE, "--kwargs"),
        (["resize", "--kwargs", "[1, 2]"], USAGE, "JSON object"),
        (["resize", "--delay", "-1"], USAGE, "--delay"),
        (["resize", "--delay", "soon"], USAGE, "--delay"),
        (["resize", "--id", ""], USAGE, "--id"),
        (["", "1"], USAGE, "JOB"),
        (["resize", "-q", ""], USAGE, "queue"),
        (["resize", "-q", "a{b}"], USAGE, "queue"),
        (["resize", "--url", ""], USAGE, "--url"),
        (["resize", "--url", "nonsense"], RUNTIME, "invalid backend URL 'nonsense'"),
        (["resize", "--app", "no_such_module:app"], USAGE, "cannot import 'no_such_module'"),
        (["resize", "--app", "os:sep"], USAGE, "not a tasuki.App"),
        (["resize", "--app", "tests.e2e.cli_app_bad_url:app"], RUNTIME, "'bogus'"),
        (["no_such_job", "--app", APP], RUNTIME, "no job named 'no_such_job'"),
        (
            ["resise", "--app", APP],
            RUNTIME,
            "no job named 'resise' is registered on this app; did you mean 'resize'?",
        ),
        (["resize", "1", "2", "3", "--app", APP], RUNTIME, "wrong arguments for job 'resize'"),
    ],
)
def test_enqueue_bad_input(args: list[str], status: int, needle: str, mem: str) -> None:
    extra = [] if "--url" in args or "--app" in args else ["--url", mem]
    assert_one_line_error(tasuki_cli("enqueue", *args, *extra), status, needle)


def test_enqueue_unreachable_server(dead_port: int) -> None:
    result = tasuki_cli("enqueue", "resize", "1", "--url", f"redis://127.0.0.1:{dead_port}")
    assert_one_line_error(result, RUNTIME, f"127.0.0.1:{dead_port}", "unreachable")


# -- tasuki stats / purge ------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "status", "needle"),
    [
        (["--watch", "-1"], USAGE, "--watch"),
        (["--watch", "0"], USAGE, "--watch"),
        ([""], USAGE, "queue"),
        (["--url", "bogus://x"], RUNTIME, "unsupported backend URL scheme 'bogus'"),
        (["--url", "sqlite:///x.db?busy_timeout=abc"], RUNTIME, "busy_timeout"),
        (["--app", "tests.e2e.cli_app:nothing"], USAGE, "has no attribute 'nothing'"),
        (["--app", APP, "--url", "memory://other"], USAGE, "not both"),
    ],
)
def test_stats_bad_input(args: list[str], status: int, needle: str, mem: str) -> None:
    tasuki.App(mem).close()  # the database exists: only the bad input is wrong
    extra = [] if "--url" in args or "--app" in args else ["--url", mem]
    assert_one_line_error(tasuki_cli("stats", *args, *extra), status, needle)


def test_stats_unreachable_server(dead_port: int) -> None:
    result = tasuki_cli("stats", "--url", f"redis://127.0.0.1:{dead_port}")
    assert_one_line_error(result, RUNTIME, "unreachable")


@pytest.mark.parametrize(
    ("args", "status", "needle"),
    [
        ([""], USAGE, "queue"),
        (["a{b}"], USAGE, "queue"),
        ([], USAGE, "QUEUE"),
    ],
)
def test_purge_bad_input(args: list[str], status: int, needle: str, mem: str) -> None:
    assert_one_line_error(tasuki_cli("purge", *args, "--yes", "--url", mem), status, needle)


def test_purge_unreachable_server(dead_port: int) -> None:
    result = tasuki_cli("purge", "default", "--yes", "--url", f"redis://127.0.0.1:{dead_port}")
    assert_one_line_error(result, RUNTIME, "unreachable")


# -- tasuki dead ... -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "status", "needle"),
    [
        (["list", "--limit", "0"], USAGE, "--limit"),
        (["list", "--offset", "-1"], USAGE, "--offset"),
        (["list", ""], USAGE, "queue"),
        (["show", "default"], USAGE, "MESSAGE_ID"),
        (["show", "default", "nope"], RUNTIME, "no dead letter 'nope' in queue 'default'"),
        (["show", "", "nope"], USAGE, "queue"),
        (["redrive", "default"], USAGE, "--all"),
        (["redrive", "default", "abc", "--all"], USAGE, "--all"),
        (["redrive", "default", ""], USAGE, "id"),
        (["purge", ""], USAGE, "queue"),
        (["nope"], USAGE, "No such command 'nope'"),
    ],
)
def test_dead_bad_input(args: list[str], status: int, needle: str, mem: str) -> None:
    tasuki.App(mem).close()
    assert_one_line_error(tasuki_cli("dead", *args, "--url", mem), status, needle)


@pytest.mark.parametrize(
    "command", [["list"], ["show", "default", "x"], ["redrive", "default", "--all"]]
)
def test_dead_unreachable_server(command: list[str], dead_port: int) -> None:
    result = tasuki_cli("dead", *command, "--url", f"redis://127.0.0.1:{dead_port}")
    assert_one_line_error(result, RUNTIME, "unreachable")


def test_dead_purge_not_confirmed(mem: str) -> None:
    tasuki.App(mem).close()
    env = env_with_src()
    result = subprocess.run(
        [sys.executable, "-m", "tasuki", "dead", "purge", "default", "--url", mem],
        input="n\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "Aborted" in result.stderr


# -- tasuki worker / demo ------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "status", "needle"),
    [
        (["no_such_module:app"], USAGE, "cannot import 'no_such_module'"),
        ([":app"], USAGE, "expected module:app"),
        (["os:sep"], USAGE, "is a str, not a tasuki.App"),
        (["tests.e2e.cli_app_bad_url:app"], RUNTIME, "'bogus'"),
        ([APP, "-c", "0"], USAGE, "--concurrency"),
        ([APP, "--grace", "-1"], USAGE, "--grace"),
        ([APP, "--log-level", "LOUD"], USAGE, "--log-level"),
        ([APP, "-q", "a{b}"], RUNTIME, "may not contain braces"),
        ([APP, "--metrics-port", "70000"], USAGE, "--metrics-port"),
    ],
)
def test_worker_bad_input(args: list[str], status: int, needle: str) -> None:
    assert_one_line_error(tasuki_cli("worker", *args), status, needle)


def test_worker_metrics_port_taken() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = tasuki_cli("worker", APP, "--metrics-port", str(port))
    assert_one_line_error(result, RUNTIME, f"cannot serve metrics on 127.0.0.1:{port}")


@pytest.mark.parametrize(
    ("args", "status", "needle"),
    [
        (["-c", "0"], USAGE, "--concurrency"),
        (["--db", "/no/such/directory/demo.db"], RUNTIME, "/no/such/directory/demo.db"),
    ],
)
def test_demo_bad_input(args: list[str], status: int, needle: str) -> None:
    assert_one_line_error(tasuki_cli("demo", *args), status, needle)


# -- brackets print as written (rich markup is never read from data) ------------------
def test_install_hint_keeps_its_brackets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A backend module that exists but whose dependency is missing: the hint names the
    extra, `pip install 'tasuki[fakedb]'`, as written."""
    (tmp_path / "tasuki_test_fakedb.py").write_text("import tasuki_test_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(urls._SCHEMES, "fakedb", ("tasuki_test_fakedb", "from_url", "fakedb"))
    result = CliRunner().invoke(cli, ["stats", "--url", "fakedb://x"])
    assert result.exit_code == 1, result.output
    assert "pip install 'tasuki[fakedb]'" in result.stderr
    assert "tasuki_test_no_such_dependency" in result.stderr


def test_brackets_in_data_print_as_written(tmp_path: Path) -> None:
    db = tmp_path / "[shop].db"
    url = f"sqlite:///{db}"
    app = tasuki.App(url)
    app.send("images[hd]", b"{}")
    [d] = app.backend.lease("images[hd]", 1, 30.0)
    error = ErrorInfo("KeyError", "'tasuki[redis]' [bold]not[/bold] found", "tb")
    app.backend.settle([Settle.dead(d.receipt, "gave up on [KeyError]", error)])
    stats = tasuki_cli("stats", "--url", url)
    assert stats.returncode == 0, stats.stderr
    assert "images[hd]" in stats.stdout and "[shop].db" in stats.stdout
    listed = tasuki_cli("dead", "list", "images[hd]", "--url", url)
    assert listed.returncode == 0, listed.stderr
    out = listed.stdout
    assert "images[hd]" in out
    assert "gave up on [KeyError]" in out
    assert "KeyError: 'tasuki[redis]' [bold]not[/bold] found" in out
    shown = tasuki_cli("dead", "show", "images[hd]", d.id, "--url", url)
    assert "[bold]not[/bold]" in shown.stdout


# -- planned backends ----------------------------------------------------------------
def test_a_planned_backend_says_planned_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scheme of the design is built today, so a planned one is made for the test: a
    scheme whose module is not in the package. The command says it is planned, on one
    line, status 1, and offers no `pip install` (no extra would bring it)."""
    monkeypatch.setitem(urls._SCHEMES, "later", ("tasuki.backends.not_built", "from_url", "x"))
    result = CliRunner().invoke(cli, ["stats", "--url", "later://host/db"])
    assert result.exit_code == RUNTIME, result.output
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    assert "the later:// backend is planned" in errors[0]
    assert "sqlite://" in errors[0]  # and names the backends of today
    assert "pip install" not in result.stderr


def test_unknown_scheme_lists_what_exists_and_what_is_planned() -> None:
    result = tasuki_cli("stats", "--url", "bogus://x")
    assert_one_line_error(result, RUNTIME, "unsupported backend URL scheme 'bogus'")
    line = result.stderr.strip()
    known, _, planned = line.partition("planned:")
    for scheme in ("memory", "sqlite", "redis", "rediss", "unix"):
        assert scheme in known
    for scheme, module in (
        ("postgresql", "tasuki.backends.postgres"),
        ("sqs", "tasuki.backends.sqs"),
    ):
        built = importlib.util.find_spec(module) is not None
        assert (scheme in known) == built and (scheme in planned) != built, line


def test_planned_is_decided_by_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scheme whose module is not in the package is planned; one whose module exists
    is known. No list to keep in step by hand."""
    monkeypatch.setitem(urls._SCHEMES, "later", ("tasuki.backends.not_built", "from_url", "x"))
    with pytest.raises(tasuki.errors.InvalidURL, match="planned") as caught:
        urls.backend_from_url("later://x")
    assert "pip install" not in str(caught.value)
    assert "later" in urls.planned_schemes() and "sqlite" not in urls.planned_schemes()


# -- read-only commands never create a database --------------------------------------
@pytest.mark.parametrize(
    "command",
    [
        ["stats"],
        ["stats", "default", "--json"],
        ["dead", "list"],
        ["dead", "list", "default", "--json"],
        ["dead", "show", "default", "abc"],
        ["dead", "redrive", "default", "--all"],
        ["dead", "purge", "default", "--yes"],
        ["purge", "default", "--yes"],
    ],
)
def test_read_only_commands_never_create_a_database(command: list[str], tmp_path: Path) -> None:
    missing = tmp_path / "wrong" / "tasuki.db"
    missing.parent.mkdir()
    result = tasuki_cli(*command, "--url", f"sqlite:///{missing}")
    assert_one_line_error(result, RUNTIME, "no SQLite database", str(missing))
    assert list(missing.parent.iterdir()) == []


def test_default_url_and_env_never_create_a_database(tmp_path: Path) -> None:
    result = tasuki_cli("stats", cwd=tmp_path)  # the default: sqlite:///tasuki.db
    assert_one_line_error(result, RUNTIME, "no SQLite database", "tasuki.db")
    env_result = _run_with_env(["dead", "list"], tmp_path, f"sqlite:///{tmp_path / 'x.db'}")
    assert_one_line_error(env_result, RUNTIME, "no SQLite database", "x.db")
    assert list(tmp_path.iterdir()) == []
    enq = tasuki_cli("enqueue", "resize", "1", cwd=tmp_path)  # a producer creates it
    assert enq.returncode == 0, enq.stderr
    assert (tmp_path / "tasuki.db").exists()
    assert tasuki_cli("stats", "--json", cwd=tmp_path).returncode == 0


def _run_with_env(args: list[str], cwd: Path, url: str) -> subprocess.CompletedProcess[str]:
    env = {**env_with_src(), "TASUKI_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "tasuki", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


# -- output made for copying ---------------------------------------------------------
def _dead_letter_one(url: str) -> str:
    app = tasuki.App(url)
    app.send("default", b'{"args": [], "kwargs": {}}', headers={"tasuki-job": "resize"})
    [d] = app.backend.lease("default", 1, 30.0)
    try:
        raise RuntimeError("card declined")
    except RuntimeError as exc:
        info = ErrorInfo.from_exception(exc)
    app.backend.settle([Settle.dead(d.receipt, "retries exhausted after 1 attempts", info)])
    app.close()
    return d.id


def test_dead_list_ids_stay_whole_in_a_narrow_terminal(mem: str) -> None:
    message_id = _dead_letter_one(mem)
    assert len(message_id) == 32
    for columns in ("80", "50"):
        env = {**env_with_src(), "COLUMNS": columns}
        result = subprocess.run(
            [sys.executable, "-m", "tasuki", "dead", "list", "--url", mem],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert message_id in result.stdout, result.stdout


def test_dead_show_prints_the_traceback_as_a_traceback(mem: str) -> None:
    message_id = _dead_letter_one(mem)
    shown = tasuki_cli("dead", "show", "default", message_id, "--url", mem)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "Traceback (most recent call last):" in lines
    assert "RuntimeError: card declined" in lines
    assert any(line.lstrip().startswith('File "') for line in lines)
    assert "\\n" not in shown.stdout
    assert message_id in lines[0]
    as_json = orjson.loads(
        tasuki_cli("dead", "show", "default", message_id, "--json", "--url", mem).stdout
    )
    assert as_json["id"] == message_id
    assert as_json["traceback"].startswith("Traceback (most recent call last):")


@pytest.mark.parametrize("command", [["stats"], ["dead", "list"], ["dead", "show"]])
def test_every_listing_has_json(command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0 and "--json" in result.output


def test_sqlite_create_false_refuses_a_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(tasuki.errors.BackendUnavailable, match="no SQLite database"):
        tasuki.App(f"sqlite:///{missing}?create=false")
    assert not missing.exists()
    tasuki.App(f"sqlite:///{missing}").close()  # the default creates it
    with tasuki.App(f"sqlite:///{missing}?create=false") as app:  # and now it exists
        assert app.stats()["ready"] == 0
    with pytest.raises(tasuki.errors.InvalidURL, match="create"):
        tasuki.App(f"sqlite:///{missing}?create=maybe")
