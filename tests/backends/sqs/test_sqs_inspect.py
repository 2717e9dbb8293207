"""`inspect` on SQS with a lock store (inspecting.py): what the records tell of one
message, on either store. SQS itself shows nothing of a message it has not handed out."""

from __future__ import annotations

import time
import uuid

import pytest

from tasuki.backends.base import Keep, Progress, Settle
from tasuki.core.message import ErrorInfo
from tasuki.testing.contract.helpers import env
from tests.backends.sqs.support import opened
from tests.support.deps import need

need("boto3")


def test_inspect_follows_a_message_through_its_states(locked_url: str) -> None:
    backend = opened(locked_url)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    try:
        assert backend.inspect(queue, "never").state == "unknown"
        backend.enqueue([env(queue, "m", max_attempts=3, keep_id=60.0)])
        assert backend.inspect(queue, "m").state == "ready"  # waiting (ready or delayed)
        [first] = backend.lease(queue, 1, 30.0)
        assert backend.keep([Keep(first.receipt, 30.0, Progress(0.5, "half"))]) == ["held"]
        running = backend.inspect(queue, "m")
        assert (running.state, running.attempt) == ("in_flight", 1)
        assert running.fencing_token == first.fencing_token
        assert running.lease_expires_at == pytest.approx(time.time() + 30, abs=2)
        assert running.progress == Progress(0.5, "half")
        backend.settle([Settle.release(first.receipt, 0.0, penalty=True)])
        assert backend.inspect(queue, "m").state == "ready"
        [second] = backend.lease(queue, 1, 30.0)
        assert backend.inspect(queue, "m").attempt == 2
        before = time.time()
        assert backend.ack([second.receipt]) == [True]
        done = backend.inspect(queue, "m")
        assert done.state == "finished"
        assert done.finished_until is not None and done.finished_until >= before + 55
    finally:
        backend.close()


def test_inspect_tells_a_dead_letter_until_it_is_redriven(locked_url: str) -> None:
    backend = opened(locked_url)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    try:
        backend.enqueue([env(queue, "d", max_attempts=4)])
        [d] = backend.lease(queue, 1, 30.0)
        error = ErrorInfo("KeyError", "'x'", "Traceback (most recent call last):\n  ...")
        backend.settle([Settle.dead(d.receipt, "failed", error)])
        dead = backend.inspect(queue, "d")
        assert (dead.state, dead.reason, dead.error) == ("dead", "failed", error)
        assert (dead.attempt, dead.max_attempts) == (1, 4)
        assert dead.died_at == pytest.approx(time.time(), abs=5)
        assert backend.redrive(queue, ["d"]) == 1
        assert backend.inspect(queue, "d").state == "ready"
    finally:
        backend.close()


def test_inspect_tells_a_cancelled_message(locked_url: str) -> None:
    backend = opened(locked_url)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    try:
        backend.enqueue([env(queue, "w"), env(queue, "r")])
        assert backend.cancel(queue, "w") == "removed"
        assert backend.inspect(queue, "w").state == "cancelled"
        [r] = backend.lease(queue, 10, 30.0)
        assert backend.cancel(queue, r.id) == "signalled"
        assert backend.inspect(queue, r.id).state == "cancelled"
    finally:
        backend.close()


def test_tasuki_inspect_on_sqs_does_not_invent_an_attempt_limit(locked_url: str) -> None:
    """SQS keeps a waiting message's attempt limit in its body, which no record holds:
    `tasuki inspect` prints the attempts alone, not `1 of None`."""
    from click.testing import CliRunner

    from tasuki.cli.main import cli

    backend = opened(locked_url)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    try:
        backend.enqueue([env(queue, "m")])
        backend.lease(queue, 1, 30.0)
        result = CliRunner().invoke(cli, ["inspect", queue, "m", "--url", locked_url])
        assert result.exit_code == 0, result.output
        assert "None" not in result.output, result.output
        assert "in flight" in result.output and "attempt:         1\n" in result.output
    finally:
        backend.close()
