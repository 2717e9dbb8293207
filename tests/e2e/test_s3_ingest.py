"""The S3 ingest example end to end, with real processes: a local S3+SQS server, two
workers, 50 objects PUT, a worker SIGKILLed midway; every row ends processed, once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.support.servers import DUMMY_AWS_ENV, env_with_src

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_s3_ingest_survives_a_killed_worker() -> None:
    pytest.importorskip("boto3")
    env = env_with_src()
    env.update(DUMMY_AWS_ENV)
    env.pop("S3_ENDPOINT", None)
    result = subprocess.run(
        [sys.executable, "-m", "examples.s3_ingest.run", "--objects", "50", "--kill-one"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = orjson.loads(result.stdout.strip().splitlines()[-1])
    assert summary == {
        "objects": 50,
        "rows": 50,
        "processed": 50,
        "max_completions": 1,
        "invalid": 1,
        "killed": True,
    }
