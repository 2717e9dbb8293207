"""The benchmark tables say which command, commit and engines made them."""

from __future__ import annotations

import subprocess

import pytest
from benchmarks import machine, report


@pytest.fixture(autouse=True)
def _reference() -> None:
    report.set_reference("tasuki-redis")


def test_a_clean_commit_is_not_dirty() -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert machine.git_revision(commit, []) == "0123456"
    assert machine.git_revision(commit, ["src/tasuki/app.py"]) == "0123456-dirty"
    assert machine.git_revision(None, None) is None


def test_uncommitted_is_the_code_that_runs() -> None:
    expected = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", *machine.CODE],
        cwd=machine.ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert machine.uncommitted() == sorted(line[3:] for line in expected.splitlines())
    assert (
        machine.git_commit()
        == subprocess.run(
            ["git", "rev-parse", "HEAD"],
            check=True,
            cwd=machine.ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )


def test_the_header_names_the_engines_and_their_versions() -> None:
    redis = {"engines": {"redis-server": "7.0.15", "SQLite": "3.40.1"}, "redis_server": "7.0.15"}
    assert report.engines_text(redis) == "redis-server 7.0.15, SQLite 3.40.1"
    postgres = {
        "engines": {
            "PostgreSQL": "PostgreSQL 15.14 (Debian 15.14-0+deb12u1) on x86_64-pc-linux-gnu, "
            "compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit"
        },
        "redis_server": "7.0.15",
    }
    assert report.engines_text(postgres) == "PostgreSQL 15.14 (Debian 15.14-0+deb12u1)"
    assert report.engines_text({"engines": {"PostgreSQL": None}}) == (
        "PostgreSQL (version not recorded)"
    )
    report.set_reference("tasuki-postgres")  # a PostgreSQL run from before engines were kept
    assert report.engines_text({"redis_server": "7.0.15"}) == "PostgreSQL (version not recorded)"


def test_the_header_names_the_command_and_the_commit() -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    clean = {"command": "./dev bench postgres", "tasuki_commit": commit, "tasuki_uncommitted": []}
    assert report.provenance(clean) == (
        "Command: `./dev bench postgres`; tasuki at commit `0123456789ab`, a clean tree."
    )
    dirty = {**clean, "tasuki_uncommitted": ["src/tasuki/app.py"]}
    assert report.provenance(dirty) == (
        "Command: `./dev bench postgres`; tasuki at commit `0123456789ab` with uncommitted "
        "changes to src/tasuki/app.py."
    )
    assert report.provenance({"tasuki_revision": "6e9a31a-dirty"}) == (
        "Command: `not recorded`; tasuki at revision `6e9a31a-dirty` "
        "(uncommitted changes, not recorded which)."
    )


def test_the_header_names_the_load_before_and_after() -> None:
    ran = {"load_before": [0.0, 0.12, 0.5], "load_after": [1.87, 1.2, 0.75]}
    assert report.load_text(ran) == ("Load average before 0.00/0.12/0.50, after 1.87/1.20/0.75")
    assert report.load_text({}) == (
        "Load average not recorded (a run from before the harness kept it)"
    )
