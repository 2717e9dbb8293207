"""`tasuki dashboard` as the user starts it: a port in use is one `Error:` line, and the
token can come from a file (or the environment) instead of the command line, where
every user of the machine can read it in `ps`."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

import tasuki
from tasuki.cli.main import cli
from tasuki.testing.servers import free_port, wait_for_port
from tests.e2e.test_cli import ROOT, tasuki_cli
from tests.e2e.test_cli_errors import RUNTIME, USAGE, assert_one_line_error
from tests.support.processes import env_with_src

TOKEN = "6a1f0c9e8d7b2a4c5e3f1b0d9c8a7e6f"


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'dash.db'}"
    tasuki.App(url).close()  # the dashboard opens an existing store only
    return url


def test_a_port_in_use_is_one_error_line(url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = tasuki_cli("dashboard", "--url", url, "--port", str(port), timeout=60)
    assert_one_line_error(result, RUNTIME, f"port {port} on 127.0.0.1 is in use")
    assert result.stdout == ""  # no "serving on" line before it


def get(port: int, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/queues", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return err.code


def test_the_token_from_a_file(url: str, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    port = free_port()
    dashboard = subprocess.Popen(
        [sys.executable, "-m", "tasuki", "dashboard", "--url", url, "--port", str(port)],
        env=env_with_src() | {"TASUKI_DASHBOARD_TOKEN_FILE": str(token_file)},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_port(port, timeout=60)
        assert get(port, TOKEN) == 200
        assert get(port, None) == 401 and get(port, TOKEN + "x") == 401
    finally:
        dashboard.terminate()
        out, err = dashboard.communicate(timeout=30)
    assert f"on http://127.0.0.1:{port}/ (token required)" in out
    assert "warning" not in err, err  # neither argv nor a file others can read


@pytest.mark.parametrize(
    ("contents", "mode", "needle"),
    [("", 0o600, "holds no token"), ("\n  \n", 0o600, "holds no token")],
)
def test_a_token_file_without_a_token_is_refused(
    url: str, tmp_path: Path, contents: str, mode: int, needle: str
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(contents)
    token_file.chmod(mode)
    result = tasuki_cli("dashboard", "--url", url, "--token-file", str(token_file))
    assert_one_line_error(result, USAGE, "--token-file", needle)


def test_a_token_twice_or_from_a_missing_file_is_refused(url: str, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    both = tasuki_cli("dashboard", "--url", url, "--token", TOKEN, "--token-file", str(token_file))
    assert_one_line_error(both, USAGE, "give the token once")
    missing = tasuki_cli("dashboard", "--url", url, "--token-file", str(tmp_path / "nope"))
    assert_one_line_error(missing, USAGE, "--token-file", "nope")


def test_a_token_on_the_command_line_or_in_a_readable_file_is_warned_of(tmp_path: Path) -> None:
    """Both warnings print before the refusal that ends these runs (a weak token off
    the loopback): nothing is served."""
    runner = CliRunner()
    argv = runner.invoke(cli, ["dashboard", "--host", "0.0.0.0", "--token", "weak"])
    assert argv.exit_code == 2
    assert "visible to every user of this machine" in argv.stderr
    token_file = tmp_path / "token"
    token_file.write_text("weak\n")
    token_file.chmod(0o644)
    readable = runner.invoke(
        cli, ["dashboard", "--host", "0.0.0.0", "--token-file", str(token_file)]
    )
    assert readable.exit_code == 2
    assert "can be read by other users (mode 0644)" in readable.stderr
    assert "visible to every user" not in readable.stderr
    from_env = runner.invoke(
        cli, ["dashboard", "--host", "0.0.0.0"], env={"TASUKI_DASHBOARD_TOKEN": "weak"}
    )
    assert from_env.exit_code == 2 and "weak token" in from_env.stderr
    assert "warning" not in from_env.stderr
