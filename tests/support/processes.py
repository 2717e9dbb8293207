"""How the tests start child Python processes."""

from __future__ import annotations

import os
from pathlib import Path


def env_with_src() -> dict[str, str]:
    """Environment for child Python processes that must import tasuki and the tests."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    paths = [str(root / "src"), str(root)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env
