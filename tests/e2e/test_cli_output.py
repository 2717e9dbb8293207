"""What the commands print, read at 80 and 200 columns, into a pipe and on a terminal.

A pipe gets $COLUMNS (80 when unset); a terminal is a real pseudo-terminal whose window
size is set, with $COLUMNS unset, as a user's would be. Whatever the width: no line is
wider than the terminal, every word of the data is whole on some line (never split
letter by letter), and every id is whole on one line, to copy.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from rich.cells import cell_len

import tasuki
from tasuki.backends.base import Settle
from tasuki.core.message import ErrorInfo
from tests.support.processes import env_with_src

ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-B]|[=>78])")
CELL_EDGES = re.compile(r"[\s│┃]+")
WIDTHS = [80, 200]
WHERE = ["pipe", "terminal"]

# The dead letters of `tasuki demo`, and one with a caller-given id, as the backend keeps them.
LETTERS = [
    (
        "charge_card",
        "retries exhausted after 3 attempts",
        RuntimeError("payment gateway refused card 4"),
    ),
    ("charge_card", "gave up on KeyError", KeyError("customer 3 does not exist")),
    ("no_such_job", "unknown job 'no_such_job'", LookupError("unknown job 'no_such_job'")),
    (
        "resize",
        "undecodable message",
        ValueError(
            "cannot decode the json body: unexpected end of data: line 1 column 20 (char 19)"
        ),
    ),
]
LONG_ID = "invoice-2026-11-24-customer-0042-attempted-charge"


def run(args: list[str], width: int, where: str, cwd: Path) -> str:
    """The command's stdout as a user sees it, escape sequences and carriage returns off."""
    env = env_with_src()
    env.pop("LINES", None)
    if where == "pipe":
        env["COLUMNS"] = str(width)
        result = subprocess.run(
            [sys.executable, "-m", "tasuki", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout
    env.pop("COLUMNS", None)
    env["TERM"] = "xterm-256color"
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 50, width, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tasuki", *args],
        stdin=secondary,
        stdout=secondary,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    os.close(secondary)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the terminal's last writer exited
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(primary)
        status = proc.wait(120)
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
        proc.stderr.close()
    assert status == 0, err
    raw = b"".join(chunks).decode()
    assert "\x1b[" in raw, "a terminal gets styles: this was not one"
    return ANSI.sub("", raw).replace("\r", "")


def assert_reads_well(out: str, width: int, ids: list[str], words: set[str]) -> list[str]:
    lines = out.splitlines()
    wide = [line for line in lines if cell_len(line) > width]
    assert not wide, "\n".join(wide)
    for message_id in ids:
        assert any(message_id in line for line in lines), (message_id, out)
    tokens = {token for line in lines for token in CELL_EDGES.split(line)}
    assert words <= tokens, (words - tokens, out)
    return lines


def words(*texts: str) -> set[str]:
    return {w for t in texts for w in t.split()}


@pytest.fixture
def dead_db(tmp_path: Path) -> tuple[str, list[str]]:
    url = "sqlite:///dead.db"  # relative: the commands run in tmp_path, lines stay short
    app = tasuki.App(f"sqlite:///{tmp_path / 'dead.db'}")
    ids = []
    for n, (job, reason, exc) in enumerate(LETTERS):
        given = LONG_ID if n == 0 else None
        app.send(
            "demo", b'{"args": [4], "kwargs": {}}', headers={"tasuki-job": job}, message_id=given
        )
        [d] = app.backend.lease("demo", 1, 30.0)
        try:
            raise exc
        except Exception as caught:
            info = ErrorInfo.from_exception(caught)
        # A traceback is printed as it is, never folded; its lines name this file by the
        # checkout's path, so that path is made short and fixed: the same lines in any clone.
        here = str(Path(__file__).resolve().parent)
        info = dataclasses.replace(info, traceback=info.traceback.replace(here, "tests/e2e"))
        app.backend.settle([Settle.dead(d.receipt, reason, info)])
        ids.append(d.id)
    app.close()
    return url, ids


EXPECTED_WORDS = words(
    "charge_card no_such_job resize retries exhausted after 3 attempts gave up on",
    "RuntimeError: payment gateway refused card 4 KeyError: 'customer",
    "undecodable message SerializationError:",
)


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("width", WIDTHS)
def test_dead_list(dead_db: tuple[str, list[str]], tmp_path: Path, width: int, where: str) -> None:
    url, ids = dead_db
    out = run(["dead", "list", "demo", "--url", url], width, where, tmp_path)
    lines = assert_reads_well(
        out,
        width,
        ids,
        words("retries exhausted after 3 attempts RuntimeError: payment gateway refused card 4"),
    )
    if width == 200:  # room for a table: one row a letter
        row = next(line for line in lines if LONG_ID in line)
        assert "retries exhausted after 3 attempts" in row and "refused card 4" in row
    else:
        assert LONG_ID in [line.strip() for line in lines]  # the heading of its block


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("width", WIDTHS)
def test_inspect_and_show(
    dead_db: tuple[str, list[str]], tmp_path: Path, width: int, where: str
) -> None:
    url, ids = dead_db
    out = run(["inspect", "demo", LONG_ID, "--url", url], width, where, tmp_path)
    assert_reads_well(
        out, width, [LONG_ID], words("dead retries exhausted after 3 attempts refused card 4")
    )
    shown = run(["dead", "show", "demo", ids[3], "--url", url], width, where, tmp_path)
    body = shown.split("\nbody:", 1)[0]  # the body and traceback print as they are
    assert_reads_well(body, width, [ids[3]], words("undecodable message cannot decode (char 19)"))


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("width", WIDTHS)
def test_stats(dead_db: tuple[str, list[str]], tmp_path: Path, width: int, where: str) -> None:
    url, _ = dead_db
    out = run(["stats", "--url", url], width, where, tmp_path)
    lines = assert_reads_well(
        out, width, [], words("queue ready flight delayed dead oldest paused")
    )
    row = next(line for line in lines if "demo" in line and "│" in line)
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    assert cells == ["demo", "0", "0", "0", "4", "0.0s", "-"]


@pytest.mark.slow
@pytest.mark.parametrize(("width", "where"), [(80, "pipe"), (80, "terminal"), (200, "terminal")])
def test_demo(tmp_path: Path, width: int, where: str) -> None:
    """The demo's closing report, the first thing a new user reads."""
    out = run(["demo", "--db", "demo.db"], width, where, tmp_path)
    app = tasuki.App(f"sqlite:///{tmp_path / 'demo.db'}")
    ids = [d.id for d in app.dead_letters("demo")]
    app.close()
    assert len(ids) == 7
    report = out.split("where every message ended up:", 1)[1]
    assert_reads_well(report, width, ids, EXPECTED_WORDS)
