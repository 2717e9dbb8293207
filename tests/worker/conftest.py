from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.worker.helpers import WorkerProcess, kill_all


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "runs.jsonl"


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    kill_all(started)
