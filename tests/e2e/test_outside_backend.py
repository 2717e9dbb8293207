"""A backend from another package runs the contract suite the way its docs say: one
fixture and one import, in a pytest run of its own.

The package is made here: a subclass of the memory backend with a URL scheme of its own
(`echo://`), declared in the `tasuki.backends` entry-point group of an installed
distribution (a `.dist-info` folder on the import path, as pip leaves it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import env_with_src

BACKEND = '''
import threading
from typing import Any

from tasuki.backends.memory import MemoryBackend

_STORES: dict[str, "EchoBackend"] = {}
_MUTEX = threading.Lock()


class EchoBackend(MemoryBackend):
    """memory://, under another name."""


class OffByOne(EchoBackend):
    """A broken backend: every delivery claims one attempt more than it is."""

    def lease(self, *args: Any, **kwargs: Any) -> Any:
        return [d._replace(attempt=d.attempt + 1) for d in super().lease(*args, **kwargs)]


def from_url(url: str) -> EchoBackend:
    name = url.split("://", 1)[1]
    kind = OffByOne if name.startswith("broken-") else EchoBackend
    with _MUTEX:
        if name not in _STORES:
            _STORES[name] = kind(url)
        return _STORES[name]
'''

ENTRY_POINTS = """\
[tasuki.backends]
echo = echo_backend:from_url
"""

# What the docs tell a backend's author to write: the fixture, and the import.
SUITE = """
import uuid

import pytest

from tasuki.testing.contract import *  # noqa: F403


@pytest.fixture
def make_backend_url():
    return lambda: f"echo://{PREFIX}{uuid.uuid4().hex}"
"""


def suite_size() -> int:
    """How many tests the suite runs on one backend (a parametrized one counts each case)."""
    import tasuki.testing.contract as suite

    total = 0
    for cls in (getattr(suite, name) for name in suite.__all__ if name.startswith("Test")):
        for name, test in vars(cls).items():
            if name.startswith("test_"):
                cases = 1
                for mark in getattr(test, "pytestmark", []):
                    if mark.name == "parametrize":
                        cases *= len(mark.args[1])
                total += cases
    return total


def outside_package(root: Path, prefix: str, suite: str = SUITE) -> Path:
    """The backend installed under `root/site`, its test module under `root/project`."""
    site = root / "site"
    (site / "echo_backend").mkdir(parents=True)
    (site / "echo_backend" / "__init__.py").write_text(BACKEND)
    info = site / "echo_backend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-backend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    project = root / "project"
    project.mkdir()
    (project / "test_echo_contract.py").write_text(suite.replace("{PREFIX}", prefix))
    return site


# The backend's own pytest run: no configuration of this repository applies to it.
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--strict-markers"]
PYTEST += ["-W", "error"]


def run_pytest(root: Path, site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = env_with_src()
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    return subprocess.run(
        [*PYTEST, "project", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_the_whole_suite_runs_on_a_backend_of_another_package(tmp_path: Path) -> None:
    site = outside_package(tmp_path, prefix="")
    result = run_pytest(tmp_path, site, "-rs")
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    # Every test of the suite ran; those that need what the backend lacks (several
    # processes on one store, transactional steps: as on memory://) are skipped, each
    # naming the capability.
    counts = re.match(r"(\d+) passed, (\d+) skipped", out.strip().splitlines()[-1])
    assert counts is not None, out
    passed, skipped = int(counts[1]), int(counts[2])
    assert passed + skipped == suite_size() and passed >= suite_size() - 5, out
    reasons = re.findall(r"^SKIPPED \[\d+\] .*?: (.*)$", out, re.M)
    assert len(reasons) >= 1 and "echo:// lacks the cross_process capability" in reasons
    assert all(re.fullmatch(r"echo:// lacks the \w+ capability", r) for r in reasons), reasons


def test_a_broken_backend_fails_the_suite_with_the_difference(tmp_path: Path) -> None:
    site = outside_package(tmp_path, prefix="broken-")
    result = run_pytest(tmp_path, site, "-k", "test_lease_grants_token_attempt_and_fence")
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "1 failed" in out
    # The suite's assertions are rewritten like a test module's: the failure shows the
    # values that differ, not a bare AssertionError.
    assert "At index 3 diff: 2 != 1" in out, out


def test_a_url_where_a_factory_belongs_is_named(tmp_path: Path) -> None:
    suite = SUITE.replace("return lambda: f", "return f")
    site = outside_package(tmp_path, prefix="", suite=suite)
    result = run_pytest(tmp_path, site, "-k", "test_lease_grants_token_attempt_and_fence")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "make_backend_url fixture must return a function" in result.stdout
