"""The console's commands, run as an operator would: pause, resume, ls, retry, workers,
jobs, and `dead list` across every queue."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import orjson

import tasuki
from tasuki.backends.base import Settle
from tasuki.core.console import WorkerInfo
from tests.e2e.test_cli import tasuki_cli


def test_pause_shows_in_stats_and_resume_clears_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ops.db'}"
    assert tasuki_cli("enqueue", "resize", "1", "--queue", "images", "--url", url).returncode == 0
    paused = tasuki_cli("pause", "images", "--url", url)
    assert paused.returncode == 0, paused.stderr
    assert "paused 'images'" in paused.stdout
    stats = orjson.loads(tasuki_cli("stats", "--json", "--url", url).stdout)
    assert stats["images"]["paused"] is True and stats["images"]["ready"] == 1
    assert "paused" in tasuki_cli("stats", "--url", url).stdout
    assert tasuki_cli("resume", "images", "--url", url).returncode == 0
    stats = orjson.loads(tasuki_cli("stats", "--json", "--url", url).stdout)
    assert stats["images"]["paused"] is False


def test_ls_lists_filters_and_pages_and_retry_makes_ready(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ops.db'}"
    app = tasuki.App(url)

    @app.job()
    def bill(amount: int, customer: str = "") -> None: ...

    @app.job()
    def other() -> None: ...

    for n in range(5):
        bill.enqueue(n, customer="acme" if n == 3 else "x")
    other.enqueue()
    later = bill.options(delay=600.0).enqueue(99, customer="acme")

    listed = tasuki_cli("ls", "default", "--json", "--limit", "2", "--url", url)
    assert listed.returncode == 0, listed.stderr
    page = orjson.loads(listed.stdout)
    assert [m["args"] for m in page["items"]] == [[0], [1]] and page["cursor"]
    rest = orjson.loads(
        tasuki_cli("ls", "default", "--json", "--cursor", page["cursor"], "--url", url).stdout
    )
    assert [m["job"] for m in rest["items"]] == ["bill"] * 3 + ["other"]
    matched = orjson.loads(
        tasuki_cli("ls", "default", "--match", "customer=acme", "--json", "--url", url).stdout
    )
    assert [m["args"] for m in matched["items"]] == [[3]]
    by_job = tasuki_cli("ls", "default", "--job", "other", "--url", url)
    assert "other" in by_job.stdout and "bill" not in by_job.stdout
    delayed = tasuki_cli("ls", "default", "--state", "delayed", "--url", url)
    assert later in delayed.stdout and 'customer="acme"' in delayed.stdout

    assert tasuki_cli("retry", "default", later, "--url", url).returncode == 0
    again = tasuki_cli("retry", "default", later, "--url", url)
    assert again.returncode == 1 and "not delayed" in again.stdout
    assert app.inspect("default", later).state == "ready"
    app.close()


def test_workers_and_jobs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ops.db'}"
    app = tasuki.App(url)

    @app.job(retry=tasuki.Retry(max_attempts=1))
    def work(fail: bool) -> None:
        if fail:
            raise ValueError("no")

    for fail in (False, False, True):
        work.enqueue(fail)
    app.worker(announce_every=0.2).run(until_idle=True, timeout=30.0)
    info = WorkerInfo("w-elsewhere", "host-9", 9, "9.9", ("default",), 3, time.time())
    app.backend.announce(info)

    listed = orjson.loads(tasuki_cli("workers", "--json", "--url", url).stdout)
    assert "w-elsewhere" in [w["id"] for w in listed]
    table = tasuki_cli("workers", "--url", url).stdout
    assert "w-elsewhere" in table and "alive" in table
    stop = tasuki_cli("workers", "--stop", "w-elsewhere", "--url", url)
    assert stop.returncode == 0 and app.backend.announce(info) is True
    assert tasuki_cli("workers", "--stop", "nobody", "--url", url).returncode == 1

    stats = orjson.loads(tasuki_cli("jobs", "--json", "--url", url).stdout)
    work_stats = stats["default"]["work"]
    assert (work_stats["succeeded"], work_stats["failed"], work_stats["dead"]) == (2, 1, 1)
    assert "work" in tasuki_cli("jobs", "default", "--url", url).stdout
    app.close()


def test_dead_list_without_a_queue_lists_every_queue(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ops.db'}"
    app = tasuki.App(url)
    for queue in ("a", "b"):
        app.send(queue, "job", message_id=f"dead-{queue}")
        [d] = app.backend.lease(queue, 1, 30.0)
        app.backend.settle([Settle.dead(d.receipt, "testing")])
    listed = orjson.loads(tasuki_cli("dead", "list", "--json", "--url", url).stdout)
    assert sorted((d["queue"], d["id"]) for d in listed) == [("a", "dead-a"), ("b", "dead-b")]
    table = tasuki_cli("dead", "list", "--url", url).stdout
    assert "every queue: 2 in all" in table
    app.close()


def test_ls_on_sqs_lists_in_flight_and_dead_and_refuses_what_waits(
    tmp_path: Path, sqs_server: Any
) -> None:
    """SQS with a lock store: `ls` shows in-flight and dead messages with their job and
    arguments, and refuses ready and delayed ones naming the capability."""
    prefix = f"ls{uuid.uuid4().hex[:8]}-"
    url = (
        f"sqs://us-east-1?endpoint_url={sqs_server.endpoint}&prefix={prefix}"
        f"&locks=sqlite:///{tmp_path / 'locks.db'}"
    )
    app = tasuki.App(url)

    @app.job()
    def bill(amount: int, customer: str = "") -> None: ...

    bill.enqueue(1, customer="acme")
    bill.enqueue(2)
    leased = []
    for _ in range(100):
        leased += app.backend.lease("default", 2 - len(leased), 60.0)
        if len(leased) == 2:
            break
    dying, flying = sorted(leased, key=lambda d: d.id)
    assert app.backend.settle([Settle.dead(dying.receipt, "broken")]) == [True]
    shown = tasuki_cli("ls", "default", "--state", "in_flight", "--json", "--url", url)
    assert shown.returncode == 0, shown.stderr
    assert [(m["id"], m["job"]) for m in orjson.loads(shown.stdout)["items"]] == [
        (flying.id, "bill")
    ]
    dead = tasuki_cli("ls", "default", "--state", "dead", "--url", url)
    assert dying.id in dead.stdout and "bill" in dead.stdout
    for state in ("ready", "delayed"):
        refused = tasuki_cli("ls", "default", "--state", state, "--url", url)
        assert refused.returncode != 0 and "browse_waiting" in refused.stdout + refused.stderr
    app.close()
