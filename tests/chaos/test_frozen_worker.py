"""A frozen worker wakes up to find its message finished elsewhere, and harms nothing.

Worker A leases a message and is SIGSTOPped (its whole process group) for longer than
the lease. Worker B gets the message again, with a greater fencing token, and finishes
it. When A is SIGCONTed, its heartbeat's extension is refused: it logs "lease lost",
sets the job's `should_stop` (the job records it), and never settles the message; the
backend refuses A's stale token for ack and extend alike.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

import tasuki
from tasuki.backends.base import Receipt
from tests.chaos.faults import Worker
from tests.chaos.jobs import producer
from tests.chaos.recorder import read
from tests.worker.helpers import wait_until

pytestmark = pytest.mark.slow

VT = 2.0


def test_frozen_worker_wakes_to_a_lost_lease(shared_url: str, tmp_path: Path) -> None:
    log, stderr = tmp_path / "runs.jsonl", tmp_path / "workers.log"
    app = producer(shared_url, VT)
    workers: list[Worker] = []
    try:
        msg_id = app.jobs["frozen"].enqueue(1, 30.0)
        a = Worker("A", shared_url, log, VT, stderr, "-c", "1")
        workers.append(a)

        def runs(worker: str, event: str) -> list[dict[str, object]]:
            return [r for r in read(log) if r["worker"] == worker and r["event"] == event]

        wait_until(lambda: bool(runs("A", "start")), 20)
        a.freeze_outside_writes(shared_url)
        b = Worker("B", shared_url, log, VT, stderr, "-c", "1")
        workers.append(b)
        wait_until(lambda: bool(runs("B", "end")), 20)  # redelivered and finished elsewhere
        a.signal_group(signal.SIGCONT)
        wait_until(lambda: bool(runs("A", "end")), 20)

        (first,) = runs("A", "start")
        (second,) = runs("B", "start")
        (woken,) = runs("A", "end")
        assert first["id"] == second["id"] == msg_id
        assert (first["attempt"], second["attempt"]) == (1, 2)
        assert int(second["fence"]) > int(first["fence"])  # type: ignore[call-overload]
        assert woken["should_stop"] is True and woken["stop_reason"] == "lease lost"

        wait_until(lambda: "lease lost" in _lines_about(stderr, msg_id), 10)
        assert "ack refused" not in _lines_about(stderr, msg_id)  # never even tried
        # The backend refuses A's stale token, whatever A might still try.
        backend = app.backend
        stale = Receipt("default", msg_id, str(first["token"]))
        assert backend.extend([stale], VT) == [False]
        assert backend.ack([stale]) == [False]

        wait_until(lambda: _settled(app), 10)
        assert app.dead_letters("default") == []
        assert len(runs("B", "start")) == 1  # and A's stale run did not come back again
    finally:
        for w in workers:
            w.stop()
        app.close()


def _lines_about(path: Path, msg_id: str) -> str:
    text = path.read_text() if path.exists() else ""
    return "\n".join(line for line in text.splitlines() if msg_id in line)


def _settled(app: tasuki.App) -> bool:
    s = app.stats("default")
    return s["ready"] + s["in_flight"] + s["delayed"] == 0
