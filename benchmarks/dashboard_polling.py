"""Polling cost: does one dashboard tab, polling its page every second, slow the workers?

    .venv/bin/python -m benchmarks.dashboard_polling [--messages 15000] [--rounds 3]

A SQLite file, `tasuki dashboard` on it (its sampler runs in both arms), and one
`tasuki worker` process draining batches of no-op jobs. Each round drains a batch with
no tab open, then one with a "tab": a thread fetching the queue page once a second, as
the page's live script does (the full page, rendered on the server). Arms alternate, so
a machine's drift hits both; the result is the median throughput of each arm and the
difference. The issue's bar: at most 2 % fewer messages per second.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import tasuki

QUEUE = "bench"
# The worker's app: `tasuki worker benchmarks.dashboard_polling:app` (TASUKI_URL set).
app = tasuki.App(os.environ.get("TASUKI_URL", "memory://"))


def declare(target: tasuki.App) -> Any:
    @target.job(name="noop", queue=QUEUE)
    def noop(n: int) -> None:
        """Nothing: the cost measured is the queue's and the dashboard's, not the job's."""

    return noop


declare(app)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(check: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        time.sleep(0.02)


class Tab(threading.Thread):
    """One browser tab: its page fetched every `every` seconds until stopped."""

    def __init__(self, url: str, every: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.url, self.every, self.polls = url, every, 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            with urllib.request.urlopen(self.url, timeout=10) as response:
                response.read()
            self.polls += 1
            self.stopped.wait(self.every)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (Linux's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drain(producer: tasuki.App, job: Any, messages: int) -> float:
    """Messages per second to drain one batch of `messages`."""
    started = time.perf_counter()  # the enqueue (one bulk insert) counts in both arms
    job.enqueue_many([(i,) for i in range(messages)])

    def empty() -> bool:
        s = producer.stats(QUEUE)
        return s["ready"] == 0 and s["in_flight"] == 0

    _wait(empty, timeout=600)
    return messages / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=15000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    db = Path(tempfile.mkdtemp()) / "polling.db"
    url = f"sqlite:///{db}"
    env = {**os.environ, "TASUKI_URL": url, "PYTHONPATH": os.getcwd()}
    producer = tasuki.App(url)
    job = declare(producer)
    producer.backend.ping()
    port = _free_port()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tasuki", "dashboard", "--url", url, "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        subprocess.Popen(
            [
                *(sys.executable, "-m", "tasuki", "worker", "benchmarks.dashboard_polling:app"),
                *("-q", QUEUE, "-c", str(args.concurrency)),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
    ]
    page = f"http://127.0.0.1:{port}/queues/{QUEUE}"
    try:

        def answers() -> bool:
            try:
                with urllib.request.urlopen(page, timeout=2):
                    return True
            except OSError:
                return False

        _wait(answers)
        drain(producer, job, 300)  # warm-up: imports, the first leases
        off: list[float] = []
        on: list[float] = []
        polls = 0
        # CPU seconds of the dashboard and of the worker, and wall seconds, per arm.
        cpu = {"off": [0.0, 0.0, 0.0], "on": [0.0, 0.0, 0.0]}
        dashboard, worker = procs[0].pid, procs[1].pid

        def arm(name: str, tab: Tab | None) -> float:
            d0, w0, t0 = cpu_seconds(dashboard), cpu_seconds(worker), time.perf_counter()
            if tab is not None:
                tab.start()
            rate = drain(producer, job, args.messages)
            if tab is not None:
                tab.stopped.set()
                tab.join(15)
            spent = cpu[name]
            spent[0] += cpu_seconds(dashboard) - d0
            spent[1] += cpu_seconds(worker) - w0
            spent[2] += time.perf_counter() - t0
            return rate

        for _ in range(args.rounds):
            off.append(arm("off", None))
            tab = Tab(page)
            on.append(arm("on", tab))
            polls += tab.polls
        a, b = statistics.median(off), statistics.median(on)
        print(f"no tab:   {', '.join(f'{x:.0f}' for x in off)} msg/s (median {a:.0f})")
        print(f"one tab:  {', '.join(f'{x:.0f}' for x in on)} msg/s (median {b:.0f})")
        print(f"polls sent: {polls}; throughput change with the tab: {100 * (b - a) / a:+.1f} %")
        # The steadier figure on a shared machine: the CPU a poll costs, against the
        # CPU the worker spends per second of draining.
        per_poll = (cpu["on"][0] / cpu["on"][2] - cpu["off"][0] / cpu["off"][2]) * (
            cpu["on"][2] / max(1, polls)
        )
        worker_rate = (cpu["off"][1] + cpu["on"][1]) / (cpu["off"][2] + cpu["on"][2])
        print(
            f"dashboard CPU: {cpu['off'][0] / cpu['off'][2] * 100:.1f} % of a core without "
            f"the tab, {cpu['on'][0] / cpu['on'][2] * 100:.1f} % with it; "
            f"{per_poll * 1000:.1f} ms of CPU per poll"
        )
        print(
            f"worker CPU while draining: {worker_rate * 100:.0f} % of a core; one poll a "
            f"second costs {100 * per_poll / worker_rate:.2f} % of that"
        )
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
        producer.close()


if __name__ == "__main__":
    main()
