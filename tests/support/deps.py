"""Optional test dependencies: skipped on a partial install, required in CI.

A test module that starts with `pytest.importorskip("boto3")` vanishes from the run when
the `[dev]` extra was installed only in part, and a green run then proves nothing about
SQS. `need` skips as importorskip does on a developer's machine, but where the whole
suite is meant to run (`CI` set to true, as CI services set it, or `TASUKI_REQUIRE_ALL=1`,
as `.ci/run` sets it) a missing module fails the test, or the collection of the module
that needs it, and says which extra brings it.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def required() -> bool:
    """Whether every optional test dependency must be there (CI=true, TASUKI_REQUIRE_ALL=1)."""
    ci = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}
    return ci or os.environ.get("TASUKI_REQUIRE_ALL", "") == "1"


def need(module: str) -> ModuleType:
    """`module` imported; if it is missing, a skip locally, a failure in CI."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        why = f"{module} is not installed (pip install -e '.[dev]'): {exc}"
        if required():
            pytest.fail(why, pytrace=False)
        pytest.skip(why, allow_module_level=True)
