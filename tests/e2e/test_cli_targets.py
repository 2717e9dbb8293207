"""`MODULE:APP` as a new user types it, wrong turns included, on every command that takes
one; and the in-process `memory://` backend, which no command of another process can use.

A wrong kind of target (a job, a module, a class, a missing attribute, a function that
needs arguments, a file path) is a usage mistake: one `Error:` line naming what was
found and the App objects the module does have, status 2. Code of the user's that
raises (the module's import, an app factory) is theirs to fix: their traceback, without
tasuki's frames, then one `Error:` line, status 1.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tasuki.cli.main import cli
from tests.e2e.test_cli import ROOT
from tests.support.processes import env_with_src

USAGE, RUNTIME = 2, 1

MYAPP = '''
"""A user's module: an App, its jobs, and things that are not Apps."""
import json
import os

import tasuki

app = tasuki.App(os.environ["TARGETS_URL"])


@app.job()
def hello(name: str) -> None:
    print(f"hello {name}")


class Settings:
    debug = False


def needs_args(config: dict) -> tasuki.App:
    return app


def make_app() -> tasuki.App:
    raise RuntimeError("no config for the factory")


def make_nothing() -> int:
    return 42


def make_ok() -> tasuki.App:
    return app
'''

BROKEN = """
import tasuki

app = tasuki.App(undefined_setting)
"""

NEEDS_DEP = """
import tasuki
import no_such_dependency_xyz

app = tasuki.App()
"""

MEMAPP = """
import tasuki

app = tasuki.App("memory://")


@app.job()
def hello(name: str) -> None:
    print(f"hello {name}")
"""

MODULES = {"myapp": MYAPP, "broken": BROKEN, "needs_dep": NEEDS_DEP, "memapp": MEMAPP}


def command(name: str, target: str) -> list[str]:
    """Every command that takes MODULE:APP, with `target` as its app."""
    return {
        "worker": ["worker", target],
        "enqueue": ["enqueue", "hello", "world", "--app", target],
        "stats": ["stats", "--app", target],
        "purge": ["purge", "default", "--yes", "--app", target],
        "dead list": ["dead", "list", "--app", target],
        "dead show": ["dead", "show", "default", "x", "--app", target],
        "dead redrive": ["dead", "redrive", "default", "--all", "--app", target],
        "dead purge": ["dead", "purge", "default", "--yes", "--app", target],
        "inspect": ["inspect", "default", "x", "--app", target],
        "dashboard": ["dashboard", "--app", target],
    }[name]


COMMANDS = [
    "worker",
    "enqueue",
    "stats",
    "purge",
    "dead list",
    "dead show",
    "dead redrive",
    "dead purge",
    "inspect",
    "dashboard",
]

# target, what the one error line must say
WRONG_KINDS = [
    ("myapp:hello", ["'myapp:hello' is a job, not a tasuki.App", "myapp:app"]),
    ("myapp:json", ["'myapp:json' is a module, not a tasuki.App", "myapp:app"]),
    ("myapp:Settings", ["'myapp:Settings' is a class, not a tasuki.App", "myapp:app"]),
    ("myapp:nothing", ["'myapp' has no attribute 'nothing'", "myapp:app"]),
    ("myapp:needs_args", ["'myapp:needs_args' is a function that takes arguments", "myapp:app"]),
    ("myapp:make_nothing", ["'myapp:make_nothing' returned an int, not a tasuki.App"]),
    ("myapp.py:app", ["a module name, not a file", "'myapp:app'"]),
    ("myapp/sub:app", ["a module name, not a file"]),
    ("no_such_module:app", ["cannot import 'no_such_module'"]),
]

# target, the user's file and the error its traceback must end with
USER_CODE_FAILS = [
    ("myapp:make_app", "myapp.py", "RuntimeError: no config for the factory"),
    ("broken:app", "broken.py", "NameError: name 'undefined_setting' is not defined"),
    ("needs_dep", "needs_dep.py", "No module named 'no_such_dependency_xyz'"),
]


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The user's working directory with their modules; the CLI imports from it."""
    for name, source in MODULES.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.setenv("TARGETS_URL", f"sqlite:///{tmp_path / 'targets.db'}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_app adds the working directory
    yield tmp_path
    for name in MODULES:
        sys.modules.pop(name, None)


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(cli, args, env={"COLUMNS": "200"})


def assert_usage_error(result: Result, needles: list[str]) -> None:
    out = result.stderr
    assert result.exit_code == USAGE, (result.exit_code, out, result.exception)
    assert "Traceback" not in out, out
    errors = [line for line in out.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, out
    for needle in needles:
        assert needle in errors[0], out


def assert_user_traceback(err: str, status: int, file: str, error: str) -> None:
    """The user's traceback (their file, their error, none of tasuki's frames), then the
    one line that says which target failed."""
    assert status == RUNTIME, (status, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback (most recent call last):" in lines, err
    frames = [line for line in lines if line.lstrip().startswith('File "')]
    assert frames and all("/tasuki/" not in f and "importlib" not in f for f in frames), err
    assert any(file in f for f in frames), err
    assert any(error in line for line in lines), err
    errors = [line for line in lines if line.startswith("Error:")]
    assert errors == [lines[-1]], err


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize(("target", "needles"), WRONG_KINDS, ids=[t for t, _ in WRONG_KINDS])
def test_a_wrong_kind_of_target_is_one_usage_line(
    user_dir: Path, name: str, target: str, needles: list[str]
) -> None:
    assert_usage_error(invoke(command(name, target)), needles)


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize(
    ("target", "file", "error"), USER_CODE_FAILS, ids=[t for t, _, _ in USER_CODE_FAILS]
)
def test_the_users_own_failure_shows_their_traceback(
    user_dir: Path, name: str, target: str, file: str, error: str
) -> None:
    result = invoke(command(name, target))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert_user_traceback(result.stderr, result.exit_code, file, error)
    assert target.partition(":")[0] in result.stderr.splitlines()[-1]


def test_factories_and_the_default_attribute_still_work(user_dir: Path) -> None:
    for target in ("myapp:make_ok", "myapp", "myapp:app"):
        result = invoke(["stats", "--json", "--app", target])
        assert result.exit_code == 0, (target, result.stderr, result.exception)
        assert result.stdout.startswith("{"), result.stdout


def test_a_module_without_an_app_says_so(user_dir: Path) -> None:
    (user_dir / "jobs_only.py").write_text("def hello():\n    pass\n")
    try:
        result = invoke(["worker", "jobs_only:hello"])
    finally:
        sys.modules.pop("jobs_only", None)
    # A function without arguments may be an app factory: it is called, and says what it
    # returned.
    assert_usage_error(
        result,
        ["'jobs_only:hello' returned None, not a tasuki.App", "no tasuki.App in 'jobs_only'"],
    )


def run_cli(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tasuki", *args],
        capture_output=True,
        text=True,
        env={**env_with_src(), "COLUMNS": "200", **env},
        cwd=cwd,
        timeout=60,
        check=False,
    )


def test_worker_given_a_job_as_a_user_types_it(tmp_path: Path) -> None:
    """The slip as it happens: `tasuki worker myapp:hello` in the user's own directory."""
    (tmp_path / "myapp.py").write_text(textwrap.dedent(MYAPP))
    result = run_cli(["worker", "myapp:hello"], tmp_path, TARGETS_URL=f"sqlite:///{tmp_path}/x.db")
    assert result.returncode == USAGE, result.stderr
    assert "Traceback" not in result.stderr
    [error] = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert "'myapp:hello' is a job, not a tasuki.App" in error
    assert "myapp:app" in error


def test_a_module_that_fails_to_import_shows_the_users_traceback(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text(textwrap.dedent(BROKEN))
    result = run_cli(["worker", "broken:app"], tmp_path)
    assert_user_traceback(result.stderr, result.returncode, "broken.py", "NameError")
    assert "app = tasuki.App(undefined_setting)" in result.stderr  # the line, as Python shows it


# -- memory:// lives in one process --------------------------------------------------
MEMORY_COMMANDS = [c for c in COMMANDS if c != "worker"]


def _without_app(args: list[str]) -> list[str]:
    i = args.index("--app")
    return args[:i] + args[i + 2 :]


def assert_memory_refused(result: subprocess.CompletedProcess[str]) -> None:
    err = result.stderr
    assert result.returncode == USAGE, (result.returncode, err, result.stdout)
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, err
    for needle in ("memory://", "one process", "sqlite:///"):
        assert needle in errors[0], err
    assert result.stdout == "", result.stdout  # no id printed for a message that will vanish


@pytest.mark.parametrize("name", MEMORY_COMMANDS)
def test_memory_url_is_refused(name: str, tmp_path: Path) -> None:
    args = _without_app(command(name, "unused"))
    assert_memory_refused(run_cli([*args, "--url", "memory://"], tmp_path))


@pytest.mark.parametrize("name", ["enqueue", "stats", "dead list"])
def test_memory_url_from_the_environment_is_refused(name: str, tmp_path: Path) -> None:
    args = _without_app(command(name, "unused"))
    assert_memory_refused(run_cli(args, tmp_path, TASUKI_URL="memory://shared"))


@pytest.mark.parametrize("name", COMMANDS)
def test_an_app_on_memory_is_refused(name: str, tmp_path: Path) -> None:
    (tmp_path / "memapp.py").write_text(textwrap.dedent(MEMAPP))
    assert_memory_refused(run_cli(command(name, "memapp:app"), tmp_path))


@pytest.mark.slow
def test_the_demo_still_runs_on_memory(tmp_path: Path) -> None:
    """One process enqueues and works: memory:// is what it is for."""
    result = run_cli(["demo", "--url", "memory://"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "dead letters (7)" in result.stdout


def test_the_cli_test_app_is_not_on_memory() -> None:
    """The app the other command-line tests load works across processes."""
    result = subprocess.run(
        [sys.executable, "-c", "from tests.e2e.cli_app import app; print(app.url)"],
        capture_output=True,
        text=True,
        env=env_with_src(),
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    assert not result.stdout.startswith("memory://"), result.stdout
