"""The stall sampler, on a real process: it sees a stopped worker from outside."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.chaos.recorder import read, stalls
from tests.chaos.sampler import start_sampler, stop_sampler
from tests.worker.helpers import wait_until


def test_the_sampler_records_a_stopped_process_as_a_stall(tmp_path: Path) -> None:
    log, pids = tmp_path / "runs.jsonl", tmp_path / "pids.txt"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    sampler = start_sampler(pids, log)
    try:
        pids.write_text(f"w1 {sleeper.pid}\n")
        wait_until(lambda: any(r["event"] == "sampler" for r in read(log)), 30)
        time.sleep(0.5)  # sampled asleep (state S): no stall
        stopped = time.time()
        sleeper.send_signal(signal.SIGSTOP)
        time.sleep(1.0)
        sleeper.send_signal(signal.SIGCONT)
        resumed = time.time()
        time.sleep(0.3)
    finally:
        stop_sampler(sampler)
        sleeper.kill()
        sleeper.wait()
    records = read(log)
    assert records.unparsable == 0
    found = stalls(records)
    assert [(s.worker, s.pid, s.kind) for s in found] == [("w1", sleeper.pid, "T")], found
    (s,) = found
    # sampled every 50 ms (later on a loaded machine): it began and ended near the signals
    assert stopped - 0.5 <= s.start <= stopped + 0.5, (s, stopped)
    assert resumed - 0.5 <= s.end <= resumed + 1.0, (s, resumed)
    assert s.length >= 0.5
