"""A worker bound by its one core says so once, with the way out; otherwise it is quiet."""

from __future__ import annotations

import logging

import pytest

from tasuki.runtime import cores
from tasuki.runtime.cores import CoreWatch


class Clocks:
    def __init__(self) -> None:
        self.now = 0.0
        self.cpu = 0.0

    def advance(self, seconds: float, busy: float) -> None:
        self.now += seconds
        self.cpu += seconds * busy


def watch(clocks: Clocks, running: int, *, cpus: int = 2, processes: int = 1) -> CoreWatch:
    return CoreWatch(
        lambda: running,
        cpus=cpus,
        processes=processes,
        cpu_clock=lambda: clocks.cpu,
        clock=lambda: clocks.now,
    )


def run(w: CoreWatch, clocks: Clocks, busy: float, seconds: float) -> None:
    for _ in range(int(seconds)):
        clocks.advance(1.0, busy)
        w.tick()


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_process_busy_on_one_core_with_jobs_taking_turns_is_told_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clocks = Clocks()
    w = watch(clocks, running=8)
    with caplog.at_level(logging.WARNING, logger="tasuki"):
        run(w, clocks, busy=0.97, seconds=cores.WINDOW - 1)
        assert warnings(caplog) == []  # not before a whole window
        run(w, clocks, busy=0.97, seconds=3 * cores.WINDOW)
    said = warnings(caplog)
    assert len(said) == 1
    assert "bound by one core" in said[0] and "97 %" in said[0]
    assert "--workers auto" in said[0] and "executor='process'" in said[0]
    assert w.warned


@pytest.mark.parametrize(
    ("busy", "running", "cpus", "processes"),
    [
        (0.5, 8, 2, 1),  # the jobs wait on I/O: the core is not the limit
        (0.97, 1, 2, 1),  # one job at a time: nothing takes turns
        (0.97, 8, 1, 1),  # one CPU: no other core to run on
        (0.97, 8, 2, 2),  # a group already as wide as the CPUs
    ],
)
def test_quiet_where_more_processes_would_not_help(
    caplog: pytest.LogCaptureFixture, busy: float, running: int, cpus: int, processes: int
) -> None:
    clocks = Clocks()
    w = watch(clocks, running=running, cpus=cpus, processes=processes)
    with caplog.at_level(logging.WARNING, logger="tasuki"):
        run(w, clocks, busy=busy, seconds=3 * cores.WINDOW)
    assert warnings(caplog) == []
    assert not w.warned


def test_a_quiet_start_does_not_hide_a_busy_window_later(caplog: pytest.LogCaptureFixture) -> None:
    clocks = Clocks()
    w = watch(clocks, running=4)
    with caplog.at_level(logging.WARNING, logger="tasuki"):
        run(w, clocks, busy=0.1, seconds=2 * cores.WINDOW)
        assert warnings(caplog) == []
        run(w, clocks, busy=1.0, seconds=2 * cores.WINDOW)
    assert len(warnings(caplog)) == 1


def test_the_group_size_comes_from_the_supervisor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASUKI_WORKERS", "4")
    assert CoreWatch(lambda: 0, cpus=4).processes == 4
    assert not CoreWatch(lambda: 0, cpus=4).useful
    monkeypatch.delenv("TASUKI_WORKERS")
    assert CoreWatch(lambda: 0, cpus=4).useful
