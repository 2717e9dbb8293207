"""The README's example is a file that runs, and the README shows it as it is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.servers import env_with_src

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
    lines = result.stdout.splitlines()
    assert sorted(lines[:2]) == ["resizing image 42, attempt 1", "resizing image 7, attempt 1"]
    assert lines[2].startswith("{'ready': 0, 'in_flight': 0, 'delayed': 0, 'dead': 0")
