"""The console's core: what a listing decodes (and what it refuses to), cursors, and
percentiles from the run-time buckets."""

from __future__ import annotations

import pickle
from collections.abc import Sequence

import pytest

import tasuki
from tasuki.app.console import decoded, matches
from tasuki.backends.memory import MemoryBackend
from tasuki.core.console import (
    DURATION_BOUNDS,
    BrowseState,
    Listed,
    Position,
    Tallies,
    job_stats,
)
from tasuki.core.message import CONTENT_TYPE_HEADER, JOB_HEADER
from tasuki.core.records import MessageInfo
from tasuki.errors import BackendUnavailable, InvalidArgument


class Boom:
    """Unpickling it would run code: the console must never do that untrusted."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (exec, ("raise SystemExit('unpickled')",))


def listed(body: bytes, headers: dict[str, str]) -> Listed:
    return Listed(MessageInfo("q", "m", "ready"), body, headers, "0.0:0")


def test_json_bodies_are_decoded() -> None:
    codec = tasuki.App("memory://").codec
    info = decoded(codec, "q", listed(b'{"args":[1],"kwargs":{"k":"v"}}', {JOB_HEADER: "j"}))
    assert (info.job, info.args, info.kwargs) == ("j", (1,), {"k": "v"})
    assert matches(info, {"k": "v", "0": 1}) and not matches(info, {"k": "w"})
    assert not matches(info, {"1": 1}) and not matches(info, {"missing": None})


def test_a_pickled_body_is_decoded_only_when_signed_and_verified() -> None:
    payload = pickle.dumps({"args": [Boom()], "kwargs": {}})
    headers = {JOB_HEADER: "j", CONTENT_TYPE_HEADER: "pickle"}
    unsigned = tasuki.App("memory://", serializer="pickle", allow_unsigned_pickle=True).codec
    info = decoded(unsigned, "q", listed(payload, headers))
    assert (info.job, info.args, info.kwargs) == ("j", None, None)

    signed = tasuki.App("memory://", serializer="pickle", signing_key=b"k").codec
    forged = decoded(signed, "q", listed(payload, {**headers, "tasuki-signature": "00"}))
    assert forged.args is None
    good = pickle.dumps({"args": [1], "kwargs": {}})
    sealed = dict(headers)
    signed.sign("q", sealed, good)
    assert decoded(signed, "q", listed(good, sealed)).args == (1,)
    assert decoded(signed, "other-queue", listed(good, sealed)).args is None


def test_a_cursor_is_a_position() -> None:
    p = Position(1796176451.9030738, 12)
    assert Position.parse(p.cursor()) == p
    assert Position.parse(None) is None
    with pytest.raises(InvalidArgument, match="not a listing cursor"):
        Position.parse("nonsense")


def test_percentiles_come_from_the_buckets_within_a_third() -> None:
    tallies = Tallies()
    for n in range(1, 101):
        tallies.add("q", "j", "succeeded", 0.010 * n, now=120.0)
    tallies.add("q", "j", "dead", 50.0, now=130.0)
    [tally] = tallies.take()
    assert tallies.take() == []
    stats = job_stats({"j": tally.counts})["j"]
    assert (stats.succeeded, stats.failed, stats.dead, stats.retried) == (100, 1, 1, 0)
    for got, true in ((stats.p50, 0.50), (stats.p95, 0.95), (stats.p99, 0.99)):
        assert got is not None and true <= got <= true * 10 ** (1 / 8) + 1e-9
    assert job_stats({"j": {"succeeded": 1}})["j"].p50 is None
    assert DURATION_BOUNDS[0] == 0.001


def test_tallies_put_back_add_to_what_came_since() -> None:
    tallies = Tallies()
    tallies.add("q", "j", "retried", 0.1, now=60.0)
    taken = tallies.take()
    tallies.add("q", "j", "retried", 0.1, now=61.0)
    tallies.put_back(taken)
    [tally] = tallies.take()
    assert (tally.minute, tally.counts["retried"], tally.counts["failed"]) == (60.0, 2, 2)


class CutOff(MemoryBackend):
    """Its second batch of cancels fails, as a connection lost halfway would."""

    batches = 0

    def cancel_many(self, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
        self.batches += 1
        if self.batches == 2:
            raise BackendUnavailable("cut off")
        return super().cancel_many(queue, ids, state)


def test_a_bulk_action_cut_off_halfway_finishes_when_run_again() -> None:
    app = tasuki.App("memory://", backend=CutOff())

    @app.job()
    def job(n: int) -> None: ...

    job.enqueue_many([(n,) for n in range(500)])  # three batches of 200
    with pytest.raises(BackendUnavailable):
        app.cancel_matching("default", "ready")
    assert app.stats()["ready"] == 300
    assert app.cancel_matching("default", "ready") == 300
    assert app.stats()["ready"] == 0
