"""`tasuki worker --workers N`: a supervisor and its worker processes, real signals.

Every message is counted through the sample app's run log, across processes: a child
killed mid-job loses nothing, SIGTERM drains every child, a bad deploy ends instead of
looping, and one `/metrics` counts the jobs of every child (a dead one's too).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import tasuki
from tasuki.cli.main import cli
from tasuki.cli.worker import WorkerCount
from tasuki.runtime.supervisor import GIVE_UP_AFTER, STOP_MARGIN
from tasuki.testing.servers import free_port
from tests.support.backends import URL_FACTORIES
from tests.support.processes import env_with_src
from tests.worker.helpers import ROOT, by_n, read_log, wait_until
from tests.worker.test_processes import producer, settled

APP = "tests.worker.sample_app:app"
STARTED = re.compile(r"worker (\d+) started \(pid (\d+)\)")


class Group:
    """`tasuki worker APP --workers N ...` in its own process, its log in a file."""

    def __init__(
        self, url: str, log: Path, tmp_path: Path, *args: str, vt: float = 2.0, app: str = APP
    ) -> None:
        env = env_with_src()
        env.update(TASUKI_URL=url, TASUKI_TEST_LOG=str(log), TASUKI_TEST_VT=str(vt))
        self.stderr = tmp_path / "supervisor.log"
        with open(self.stderr, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tasuki", "worker", app, *args],
                env=env,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def text(self) -> str:
        return self.stderr.read_text() if self.stderr.exists() else ""

    def started(self) -> list[tuple[int, int]]:
        """(slot, pid) of every child started so far, in order."""
        return [(int(s), int(p)) for s, p in STARTED.findall(self.text())]

    def children(self) -> set[int]:
        """The supervisor's children alive now."""
        try:
            listed = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return set()
        return {int(p) for p in listed.split() if alive(int(p))}


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it has stopped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return 0


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return str(resp.read().decode())


def acked(scraped: str) -> float:
    found = re.search(r'^tasuki_runs_total\{[^}]*outcome="ack"[^}]*\} (\S+)$', scraped, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.fixture
def groups() -> Iterator[list[Group]]:
    """Whatever a test leaves running is killed: the children first (each has a process
    group of its own), then the supervisor."""
    started: list[Group] = []
    yield started
    for group in started:
        for pid in group.children():
            os.kill(pid, signal.SIGKILL)
        if group.proc.poll() is None:
            group.proc.kill()
        group.proc.wait(10)


@pytest.fixture(params=["redis", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return URL_FACTORIES[request.param](request, tmp_path)


def test_a_child_killed_is_replaced_and_its_messages_are_done(
    url: str, log: Path, tmp_path: Path, groups: list[Group]
) -> None:
    vt, total = 1.5, 40
    app = producer(url, vt)
    app.jobs["work"].enqueue_many([(n, 0.25) for n in range(total)])
    group = Group(url, log, tmp_path, "--workers", "2", "-c", "2", vt=vt)
    groups.append(group)

    def running_elsewhere() -> dict[int, list[int]]:
        """pid -> the messages it has started and not ended."""
        records = read_log(log)
        ended = {r["id"] for r in records if r["event"] == "end"}
        held: dict[int, list[int]] = {}
        for r in records:
            if r["event"] == "start" and r["id"] not in ended:
                held.setdefault(r["pid"], []).append(r["n"])
        return held

    wait_until(lambda: len({r["pid"] for r in read_log(log)}) == 2, 20)
    wait_until(lambda: bool(running_elsewhere()), 10, interval=0.01)
    victim, held = next(iter(running_elsewhere().items()))
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: len(by_n(read_log(log), "end")) == total, 30)
    wait_until(lambda: settled(app), 10)

    records = read_log(log)
    ends, starts = by_n(records, "end"), by_n(records, "start")
    assert sorted(ends) == list(range(total)), "a message was lost"
    assert all(len(runs) == 1 for runs in ends.values()), "a message was done twice"
    for n in held:
        again = [r for r in starts[n] if r["pid"] != victim]
        assert again, f"message {n}, held by the killed child, was not run again"
        assert again[0]["attempt"] == 2
    text = group.text()
    restarted = rf"\(pid {victim}\) exited with signal SIGKILL after .*starting it again"
    assert re.search(restarted, text)
    started = group.started()
    assert len(started) == 3, started
    slot = next(s for s, p in started if p == victim)
    assert started[-1][0] == slot
    wait_until(lambda: len(group.children()) == 2, 10)

    group.proc.send_signal(signal.SIGTERM)
    assert group.proc.wait(30) == 0


def test_sigterm_drains_every_child(
    url: str, log: Path, tmp_path: Path, groups: list[Group]
) -> None:
    app = producer(url)
    port, grace = free_port(), 4.0
    group = Group(
        url, log, tmp_path, "--workers", "2", "-c", "2", "--grace", str(grace),
        "--health-port", str(port), vt=30.0,
    )  # fmt: skip
    groups.append(group)
    # Both fetching before anything is enqueued: each child takes two of the four.
    wait_until(lambda: group.text().count("worker started:") == 2, 20)
    wait_until(lambda: status(port, "/readyz") == 200, 20)
    app.jobs["work"].enqueue_many([(0, 2.0), (1, 2.0)])
    app.jobs["cooperative"].enqueue(2, 60.0)
    app.jobs["stubborn"].enqueue(3, 60.0)
    wait_until(lambda: len(by_n(read_log(log), "start")) == 4, 20)
    assert len({r["pid"] for r in read_log(log)}) == 2, "one child holds nothing"

    term_at = time.monotonic()
    group.proc.send_signal(signal.SIGTERM)
    assert group.proc.wait(grace + STOP_MARGIN + 5) == 0
    took = time.monotonic() - term_at
    records = read_log(log)
    assert sorted(by_n(records, "end")) == [0, 1], "a job that fits in the grace did not finish"
    assert list(by_n(records, "deferred")) == [2]
    # The stubborn job is released at the grace; then only the release and exit remain.
    assert grace - 0.5 < took < grace + 8, f"the group took {took:.1f}s to stop"
    text = group.text()
    assert text.count("exited with status 0") == 2
    assert "released on shutdown" in text
    assert re.search(r"worker stopped: .* worker=1$", text, re.M), "a line without its worker"
    assert re.search(r"worker stopped: .* worker=2$", text, re.M)
    assert not group.children()

    s = app.stats("default")
    assert (s["ready"], s["in_flight"]) == (2, 0)
    deliveries = app.backend.lease("default", 2, 30.0)
    assert sorted(d.attempt for d in deliveries) == [1, 1], "an attempt was not given back"


def test_a_second_signal_makes_every_child_exit_at_once(
    sqlite_url: str, log: Path, tmp_path: Path, groups: list[Group]
) -> None:
    app = producer(sqlite_url)
    app.jobs["stubborn"].enqueue_many([(1, 60.0), (2, 60.0)])
    group = Group(sqlite_url, log, tmp_path, "--workers", "2", "-c", "1", "--grace", "60")
    groups.append(group)
    wait_until(lambda: len({r["pid"] for r in read_log(log)}) == 2, 20)
    group.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: group.text().count("gracefully (send again") == 3, 10)
    started = time.monotonic()
    group.proc.send_signal(signal.SIGINT)
    assert group.proc.wait(10) == 1, group.text()
    assert time.monotonic() - started < 5.0
    text = group.text()
    assert "all workers stopped; exiting with status 1" in text
    assert "exited with status 0" not in text
    assert not group.children()


def test_a_bad_deploy_ends_instead_of_looping(
    sqlite_url: str, log: Path, tmp_path: Path, groups: list[Group]
) -> None:
    group = Group(sqlite_url, log, tmp_path, "--workers", "2", app="tests.worker.crash_app:app")
    groups.append(group)
    assert group.proc.wait(60) == 1
    text = group.text()
    assert f"exited {GIVE_UP_AFTER} times in a row" in text
    assert "the database password is not set" in text, "the child's own error is not shown"
    assert len(group.started()) <= 2 * GIVE_UP_AFTER
    assert not group.children()


def test_a_usage_error_is_not_started_again(
    sqlite_url: str, log: Path, tmp_path: Path, groups: list[Group]
) -> None:
    group = Group(sqlite_url, log, tmp_path, "--workers", "2", app="tests.worker.sample_app:nope")
    groups.append(group)
    assert group.proc.wait(30) == 1
    text = group.text()
    assert "exited with a usage error" in text
    assert "has no attribute 'nope'" in text
    assert len(group.started()) == 2


def test_one_metrics_port_counts_every_child(
    request: pytest.FixtureRequest, log: Path, tmp_path: Path, groups: list[Group]
) -> None:
    url = URL_FACTORIES["redis"](request, tmp_path)
    app = producer(url)
    port, total = free_port(), 30
    group = Group(url, log, tmp_path, "--workers", "2", "-c", "1", "--metrics-port", str(port))
    groups.append(group)
    wait_until(lambda: group.text().count("worker started:") == 2, 20)
    wait_until(lambda: status(port, "/readyz") == 200, 20)
    app.jobs["work"].enqueue_many([(n, 0.1) for n in range(total)])
    wait_until(lambda: len(by_n(read_log(log), "end")) == total, 30)
    pids = {r["pid"] for r in read_log(log)}
    assert len(pids) == 2, "one child ran every job"
    wait_until(lambda: acked(scrape(port)) == total, 10)
    scraped = scrape(port)
    assert 'tasuki_queue_messages{queue="default",state="ready"} 0.0' in scraped
    assert 'tasuki_worker_processes{state="running"} 2.0' in scraped

    # A child's counts outlive it: the group's counter never goes back.
    os.kill(pids.pop(), signal.SIGKILL)
    wait_until(lambda: "tasuki_worker_restarts_total 1.0" in scrape(port), 10)
    assert acked(scrape(port)) == total
    wait_until(lambda: status(port, "/readyz") == 200, 20)
    group.proc.send_signal(signal.SIGTERM)
    assert group.proc.wait(30) == 0


def test_children_stop_when_the_supervisor_is_killed(
    sqlite_url: str, log: Path, tmp_path: Path, groups: list[Group]
) -> None:
    group = Group(sqlite_url, log, tmp_path, "--workers", "2")
    groups.append(group)
    wait_until(lambda: group.text().count("worker started:") == 2, 20)
    children = group.children()
    assert len(children) == 2
    group.proc.kill()
    group.proc.wait(10)
    wait_until(lambda: not any(alive(p) for p in children), 15)
    assert group.text().count("the supervisor (pid") == 2


def test_reload_with_several_workers_is_refused() -> None:
    result = CliRunner().invoke(cli, ["worker", APP, "--workers", "2", "--reload"])
    assert result.exit_code == 2
    assert "--reload runs one worker" in result.output


def test_auto_is_one_worker_per_usable_cpu() -> None:
    assert WorkerCount().convert("auto", None, None) == len(os.sched_getaffinity(0))
    assert WorkerCount().convert(" 3 ", None, None) == 3


@pytest.mark.parametrize("value", ["0", "many"])
def test_a_wrong_number_of_workers_is_a_usage_error(value: str) -> None:
    result = CliRunner().invoke(cli, ["worker", APP, "--workers", value])
    assert result.exit_code == 2
    assert "--workers" in result.output


def test_each_child_announces_itself(
    sqlite_url: str, log: Path, tmp_path: Path, groups: list[Group]
) -> None:
    group = Group(sqlite_url, log, tmp_path, "--workers", "2", "-c", "3")
    groups.append(group)
    app = tasuki.App(sqlite_url)

    def announced() -> set[int]:
        return {w.pid for w in app.workers() if not w.gone}

    wait_until(lambda: len(announced()) == 2, 20)
    assert announced() == group.children()
    assert {w.concurrency for w in app.workers()} == {3}
    group.proc.send_signal(signal.SIGTERM)
    assert group.proc.wait(30) == 0
    app.close()
