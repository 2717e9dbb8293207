"""The S3 ingest example end to end, with real processes: a local S3+SQS server, two
workers, 50 objects PUT, a worker SIGKILLed in the middle of an object; every row ends
processed, once, the interrupted ones by a later run of the same message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tasuki.testing.servers import DUMMY_AWS_ENV
from tests.support.deps import need
from tests.support.processes import env_with_src

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_s3_ingest_survives_a_killed_worker() -> None:
    need("boto3")
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
    # The kill cut runs short (rows the killed worker left `processing`), and each of those
    # objects was finished by a later run: the redelivery the kill is there to cause.
    assert summary.pop("taken_over") >= 1, result.stdout
    assert summary == {
        "objects": 50,
        "rows": 50,
        "processed": 50,
        "max_completions": 1,
        "invalid": 1,
        "killed": True,
    }
