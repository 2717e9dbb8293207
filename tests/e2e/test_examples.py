"""The README's example is a file that runs, and the README shows it as it is."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.processes import env_with_src

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_runs_as_written(tmp_path: Path) -> None:
    source = (ROOT / "examples" / "quickstart.py").read_text()
    assert source.strip() in (ROOT / "README.md").read_text(), "README shows another example"
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env_with_src(),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "resizing image 42, attempt 1" in out  # two threads print: lines may interleave
    assert out.count("resizing image 7, attempt 1") == 1  # the same id twice ran once
    assert out.splitlines()[-1].startswith("{'ready': 0, 'in_flight': 0, 'delayed': 0, 'dead': 0")


def test_the_testing_guide_runs_as_written(tmp_path: Path) -> None:
    """docs/testing.md shows examples/testing/ as it is (inlined, so it reads on GitHub
    too: tests/unit/test_docs_inline.py holds each block to its file); its tests pass in
    a pytest run of their own, as in a project of a user's (no configuration of this
    repository)."""
    shutil.copytree(ROOT / "examples" / "testing", tmp_path / "shop")
    guide = (ROOT / "docs" / "testing.md").read_text()
    for name in ("shop.py", "conftest.py", "test_shop.py"):
        code = (ROOT / "examples" / "testing" / name).read_text().strip()
        assert code in guide, f"the guide leaves out {name}"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path / "shop",
        env=env_with_src(),
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1].startswith("3 passed")
