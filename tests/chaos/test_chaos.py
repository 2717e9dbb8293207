"""A short chaos run of every fault kind on every backend: nothing lost, nothing run twice
without a fault to explain it, fencing tokens in lease order; where the backend has them,
chords fire their callback once and concurrency limits hold (tests/chaos/composite.py).

The same runner as `./dev chaos`, with every kind of fault its backend allows done at
least once (`cover`), on few jobs: the long runs are in docs/reliability.md. A second
run per backend with `durable_steps` mixes in durable jobs (tests/chaos/durable.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.backends import BACKENDS, ChaosBackend
from tests.chaos.runner import REDELIVERY, Options, capabilities, run_backend

DEFAULT = [b for b in BACKENDS if b.default]

pytestmark = pytest.mark.slow

VT = 2.0
# p99 redelivery, counted from the lapse (or the end of the outage that caused it) to the
# message's next lease by any worker: the documented target is 2 s from there (one lease
# + 2 s after a worker's death). Not to the next run's start: a worker may take a message
# ahead and hold it while its one child process is busy (3.4 s in one SQS run), or die
# holding a lease it never ran (a lapse of its own); counted to the start, those made the
# 5.5-13 s "redeliveries" seen on SQS and redis-everysec. Thirty
# runs (SQLite, Redis) at a load average of 1.5 to 9.4 stayed within it but one: at 9.4 a
# redelivered message waited behind a backlog (20 ready) for 2.16 s, a queue, not a lost
# lease. The test allows one second more than the target.
REDELIVERY_BOUND = REDELIVERY + 1.0


@pytest.mark.parametrize("backend", DEFAULT, ids=[b.name for b in DEFAULT])
def test_short_chaos_run_loses_nothing(backend: ChaosBackend, tmp_path: Path) -> None:
    opts = Options(jobs=80, workers=3, duration=4.0, seed=13, vt=VT, verbose=False, cover=True)
    report = run_backend(backend, opts, tmp_path)
    print("\n" + report.line() + "\n" + "\n".join(report.details()))
    done = {f.kind for f in report.faults}
    expected = {"stop", "kill", "killpg"}
    if "net" in backend.faults:
        expected |= {"latency", "drop", "blackhole"}
    if "restart" in backend.faults:
        expected.add("writer-kill" if backend.crash == "writer" else "restart")
    assert expected <= done, f"fault kinds not done: {expected - done}"
    # 80 job numbers; where the backend has workflows some are chords of several members.
    assert report.jobs >= 80
    assert report.unparsable == 0, report.details()
    assert report.drained and report.unsettled == 0, report.details()
    assert report.lost == [], report.details()
    assert report.unexplained == [], report.details()
    assert report.fence_violations == [], report.details()
    assert report.dead == 0
    assert report.callbacks_twice == [] and report.callbacks_missing == [], report.details()
    assert report.limit_exceeded == [] and report.stuck_slots == 0, report.details()
    assert report.duplicates > 0, "the faults interrupted nothing: the run proved nothing"
    # No duplicate may need the excuse of a stall (its worker found unable to run by the
    # sampler, outside the runner's stops): here every one has an injected fault behind
    # it. The stalls themselves are the machine's, not the worker's (a thread waiting for
    # the GIL sleeps; it is not on the run queue), and are only printed: a long one that
    # made no lease lapse says nothing of the backend, and bounding it failed a run beside
    # two long chaos runs (a 2.16 s wait for a CPU, no duplicate after it).
    assert report.starved == [], report.details()
    # On the three-node test cluster, one redelivery in a few runs has taken up to ~9 s
    # from the fault, measured to the run's start then, cause not yet found (an open item
    # of the reliability report): it keeps its wider bound of 10 s until then, while
    # loss, duplicates and fencing are held to the same rule.
    # A redelivered message that finds others ready ahead of it waits its turn: that is a
    # queue, which the short run's chords and limits make on a loaded machine (a fresh-
    # clone CI run met 3.59 s on PostgreSQL with 6 ready ahead). Those are held to the
    # bound this test kept before it measured from the lapse, lease + 4 s; the others to
    # the target + 1 s.
    wider = {"redis-cluster": 10.0}
    bound = wider.get(backend.name, REDELIVERY_BOUND)
    assert report.p99(skip_queued=True) <= bound, report.details()
    assert report.p99() <= max(bound, VT + 4.0), report.details()


@pytest.mark.parametrize("backend", DEFAULT, ids=[b.name for b in DEFAULT])
def test_short_durable_chaos_run_reruns_no_recorded_step(
    backend: ChaosBackend, tmp_path: Path
) -> None:
    """Durable jobs among the others, under every fault kind: no recorded step runs
    again, none is lost, a transactional step's write lands once (where the backend has
    `transactional_steps`), and each message gets the signal sent to it, early or late."""
    caps = capabilities(backend, tmp_path / "probe")
    if not caps.durable_steps:
        pytest.skip(f"{backend.name} lacks durable_steps")
    opts = Options(
        jobs=60, workers=3, duration=4.0, seed=17, vt=VT, verbose=False, cover=True, durable=True
    )
    (tmp_path / "run").mkdir()
    report = run_backend(backend, opts, tmp_path / "run")
    print("\n" + report.line() + "\n" + "\n".join(report.details()))
    durable = report.durable
    assert durable is not None, report.details()
    assert durable.messages > 0 and durable.early_signals > 0 and durable.late_signals > 0
    assert durable.transactional == (durable.messages if caps.transactional_steps else 0)
    assert durable.steps_rerun == [], report.details()
    assert durable.effects_twice == [] and durable.effects_missing == [], report.details()
    assert durable.errors == [], report.details()
    assert report.lost == [], report.details()
    assert report.unexplained == [] and report.fence_violations == [], report.details()
    assert report.unparsable == 0 and report.dead == 0, report.details()
    assert report.duplicates + durable.steps_again > 0, "the faults interrupted nothing"
