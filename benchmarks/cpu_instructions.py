"""Shape (d)'s cost per job in instructions, which the machine's load does not move:
`valgrind --tool=callgrind` counts what one process executes while it drains N jobs of
about 1 ms of pure-Python CPU (`shape_jobs.spin`), in one process, on `memory://`.

    python -m benchmarks.cpu_instructions --steps 18000 --jobs 200 --system tasuki
    python -m benchmarks.cpu_instructions --system dramatiq      # its StubBroker, in-process
    python -m benchmarks.cpu_instructions --system floor         # spin() N times, no worker
    python -m benchmarks.cpu_instructions --url redis://127.0.0.1:PORT/0   # tasuki on Redis

Each is run twice under callgrind, with N jobs and with none (`--jobs 0`: the
interpreter's start, the imports, the worker's start and stop), and the difference
divided by N is one job's instructions; the floor's is the job's own. What is left is
the framework's per job. Run inside: `python -m benchmarks.cpu_instructions --inner
SYSTEM N STEPS -c C`.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def inner(system: str, n: int, steps: int, conc: int, url: str = "memory://") -> None:
    from benchmarks.shape_jobs import spin

    if system == "floor":
        for _ in range(n):
            spin(steps)
        return
    if system == "tasuki":
        import tasuki

        app = tasuki.App(url)
        app.purge("default")

        @app.job(name="cpu", queue="default")
        def cpu(i: int) -> None:
            spin(steps)

        if n:
            cpu.enqueue_many([(i,) for i in range(n)])
        app.worker(concurrency=conc, scheduler=False).run(until_idle=True)
        app.close()
        return
    if system == "dramatiq":
        import dramatiq
        from dramatiq.brokers.stub import StubBroker

        broker = StubBroker()
        broker.emit_after("process_boot")
        dramatiq.set_broker(broker)

        @dramatiq.actor(max_retries=0)
        def cpu(i: int) -> None:
            spin(steps)

        for i in range(n):
            cpu.send(i)
        worker = dramatiq.Worker(broker, worker_threads=conc)
        worker.start()
        broker.join(cpu.queue_name)
        worker.join()
        worker.stop()
        return
    raise SystemExit(f"unknown system {system!r}")


def count(system: str, n: int, steps: int, conc: int, url: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        argv = [
            "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
            sys.executable, "-m", "benchmarks.cpu_instructions", "--inner", system,
            str(n), str(steps), "-c", str(conc), "--url", url,
        ]  # fmt: skip
        subprocess.run(argv, check=True, capture_output=True)
        found = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
        if found is None:
            raise RuntimeError("no totals in callgrind's output")
        return int(found.group(1))


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.cpu_instructions", description=__doc__)
    p.add_argument("--system", default="tasuki", choices=("tasuki", "dramatiq", "floor"))
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--steps", type=int, default=18_000, help="spin steps a job (~1 ms here)")
    p.add_argument("-c", "--concurrency", type=int, default=8)
    p.add_argument("--url", default="memory://", help="tasuki's backend (memory:// default)")
    p.add_argument("--inner", nargs=3, metavar=("SYSTEM", "N", "STEPS"))
    a = p.parse_args()
    if a.inner:
        inner(a.inner[0], int(a.inner[1]), int(a.inner[2]), a.concurrency, a.url)
        return
    full = count(a.system, a.jobs, a.steps, a.concurrency, a.url)
    empty = count(a.system, 0, a.steps, a.concurrency, a.url)
    per = (full - empty) / a.jobs
    print(f"{a.system} ({a.url}) -c {a.concurrency}, {a.jobs} jobs of {a.steps} steps: "
          f"{per:,.0f} instructions per job (run {full:,}, start and stop {empty:,})")  # fmt: skip


if __name__ == "__main__":
    main()
