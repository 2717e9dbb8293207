"""`python -m benchmarks.cpu_budget`: where a CPU-bound job's time goes, in measures that
hold on a loaded machine (CPU seconds, context switches, instructions), not in jobs/s.

One worker process, in this process, drains `--jobs` messages of one job from Redis and
stops once the last has run: `noop` (nothing: what the framework costs a job) or `cpu`
(`spin` for `--spin` steps, shape (d)'s job). `--system` picks tasuki (`app.worker(-c)`,
the worker `tasuki worker -c` builds) or Dramatiq (`dramatiq.Worker`, `--threads`,
RedisBroker with its default middleware and prefetch, as its CLI runs it) or Huey
(a consumer of `--concurrency` worker threads, RedisHuey with BRPOP and results off; its
process pool runs the same loop in each child). Printed as
one JSON line, each figure per job: the drain's wall time; the process's user and system
CPU (every thread's, `getrusage`); its voluntary and involuntary context switches; its
threads' time on a CPU and time runnable but waiting for one (`schedstat`: what the
machine's load takes from the drain); for `cpu`, the job's own thread CPU and the time
it stood still while it ran (the GIL held by another thread, or the core by another
process).

    python -m benchmarks.cpu_budget run --redis URL --system tasuki --job noop --jobs 2000
    BUDGET_CALLGRIND=1 valgrind --tool=callgrind \
        python -m benchmarks.cpu_budget run ...                           # instructions
    python -m benchmarks.cpu_budget spin --spin 27000 --reps 1000 --procs 2

Instructions per job: under callgrind with `BUDGET_CALLGRIND=1`, the counts are zeroed
as the drain starts and dumped once its last job ran (`callgrind_control`; the dump is
the file ending `.1`): start-up and imports left out. Callgrind counts user-space
instructions only, runs the threads one at a time and about 50 times slower, so timers
fire more often per job than outside it: the framework's share it gives is an upper
bound, and its kernel time is not in it. `spin` runs the bare loop in `--procs`
processes at once, no framework and no Redis: the CPU and wall time per loop, and the
host's steal time meanwhile.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import subprocess
import threading
import time
import uuid
from typing import Any

_done = threading.Event()
_count = 0
_want = 0
_mutex = threading.Lock()
_steps = 0
_in_job = [0.0, 0.0]  # the jobs' own wall and thread CPU seconds, summed


def spin(steps: int) -> int:
    """The same loop as `benchmarks.shape_jobs.spin`."""
    total = 0
    for i in range(steps):
        total += i * i % 7
    return total


def _ran() -> None:
    global _count
    with _mutex:
        _count += 1
        if _count >= _want:
            _done.set()


def noop(i: int) -> None:
    _ran()


def cpu(i: int) -> None:
    wall, own = time.perf_counter(), time.thread_time()
    spin(_steps)
    wall, own = time.perf_counter() - wall, time.thread_time() - own
    with _mutex:
        _in_job[0] += wall
        _in_job[1] += own
    _ran()


def _schedstat() -> tuple[float, float]:
    """Every live thread's time on a CPU and time runnable but waiting for one (the
    machine's load), in seconds (`/proc/self/task/*/schedstat`)."""
    on = waiting = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                a, b, _ = f.read().split()
        except OSError:
            continue
        on, waiting = on + int(a), waiting + int(b)
    return on / 1e9, waiting / 1e9


def _usage() -> dict[str, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    on, waiting = _schedstat()
    return {
        "on_cpu": on,
        "runqueue": waiting,
        "wall": time.perf_counter(),
        "user": r.ru_utime,
        "sys": r.ru_stime,
        "vcsw": r.ru_nvcsw,
        "ivcsw": r.ru_nivcsw,
    }


def _tasuki(url: str, job: str, jobs: int, conc: int) -> tuple[Any, Any]:
    import tasuki

    app = tasuki.App(f"{url}?prefix=budget-{uuid.uuid4().hex[:8]}:")
    fn = app.job(name=job, queue="default")(noop if job == "noop" else cpu)
    fn.enqueue_many([(n,) for n in range(jobs)])
    worker = app.worker(concurrency=conc)

    def drain() -> dict[str, float]:
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        _done.wait()
        after = _usage()  # before the stop: its threads' schedstat go with them
        worker.stop()
        thread.join()
        return after

    return drain, app.close


def _dramatiq(url: str, job: str, jobs: int, conc: int) -> tuple[Any, Any]:
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    broker = RedisBroker(url=url, namespace=f"budget-{uuid.uuid4().hex[:8]}")
    dramatiq.set_broker(broker)
    actor = dramatiq.actor(queue_name="default", actor_name=job)(noop if job == "noop" else cpu)
    for n in range(jobs):
        broker.enqueue(actor.message(n))
    worker = dramatiq.Worker(broker, worker_threads=conc)

    def drain() -> dict[str, float]:
        worker.start()
        _done.wait()
        after = _usage()
        worker.stop()
        return after

    return drain, broker.close


def _callgrind(command: str) -> None:
    """Under callgrind, zero the counts (`-z`) as the drain starts and dump them (`-d`,
    the file ending `.1`) once its last job ran: the drain's instructions alone."""
    if os.environ.get("BUDGET_CALLGRIND"):
        subprocess.run(["callgrind_control", *command.split(), str(os.getpid())], check=True)


def _huey(url: str, job: str, jobs: int, conc: int) -> tuple[Any, Any]:
    from huey import RedisHuey

    huey = RedisHuey(f"budget-{uuid.uuid4().hex[:8]}", url=url, results=False, blocking=True)
    task = huey.task(name=job)(noop if job == "noop" else cpu)
    for n in range(jobs):
        task(n)
    consumer = huey.create_consumer(workers=conc, worker_type="thread", periodic=False)

    def drain() -> dict[str, float]:
        consumer.start()
        _done.wait()
        after = _usage()
        consumer.stop(graceful=True)
        return after

    return drain, lambda: None


_SYSTEMS = {"tasuki": _tasuki, "dramatiq": _dramatiq, "huey": _huey}


def run(args: argparse.Namespace) -> None:
    global _want, _steps
    _want, _steps = args.jobs, args.spin
    make = _SYSTEMS[args.system]
    drain, close = make(args.redis, args.job, args.jobs, args.concurrency)
    before = _usage()
    _callgrind("-z")
    after = drain()
    _callgrind("-d")
    close()
    n = args.jobs
    out: dict[str, Any] = {
        "system": args.system,
        "job": args.job,
        "jobs": n,
        "c": args.concurrency,
        "load": round(os.getloadavg()[0], 2),
        "jobs_per_s": round(n / (after["wall"] - before["wall"]), 1),
    }
    for key in ("wall", "user", "sys", "on_cpu", "runqueue"):
        out[f"{key}_ms"] = round(1000 * (after[key] - before[key]) / n, 4)
    out["cpu_ms"] = round(out["user_ms"] + out["sys_ms"], 4)
    # In the job: its thread's CPU, and its wall time less that (the GIL taken by another
    # thread of the worker, or the CPU by another process, while the job ran).
    out["job_cpu_ms"] = round(1000 * _in_job[1] / n, 4)
    out["job_stalled_ms"] = round(1000 * (_in_job[0] - _in_job[1]) / n, 4)
    for key in ("vcsw", "ivcsw"):
        out[f"{key}_per_job"] = round((after[key] - before[key]) / n, 3)
    print(json.dumps(out), flush=True)


def _steal() -> list[int]:
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


def _loop(steps: int, reps: int, start: Any, q: Any) -> None:
    start.wait()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(reps):
        spin(steps)
    q.put((time.perf_counter() - wall0, time.process_time() - cpu0))


def spin_pair(args: argparse.Namespace) -> None:
    q: Any = multiprocessing.Queue()
    start = multiprocessing.Event()
    procs = [
        multiprocessing.Process(target=_loop, args=(args.spin, args.reps, start, q))
        for _ in range(args.procs)
    ]
    for p in procs:
        p.start()
    time.sleep(0.2)
    load = os.getloadavg()[0]
    s0 = _steal()
    start.set()
    got = [q.get() for _ in procs]
    s1 = _steal()
    for p in procs:
        p.join()
    d = [b - a for a, b in zip(s0, s1, strict=True)]
    out = {
        "procs": args.procs,
        "load": round(load, 2),
        "steal": round(d[7] / max(1, sum(d)), 4),
        "wall_us": [round(w / args.reps * 1e6) for w, _ in got],
        "cpu_us": [round(c / args.reps * 1e6) for _, c in got],
    }
    print(json.dumps(out), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="one worker drains --jobs messages")
    r.add_argument("--redis", required=True)
    r.add_argument("--system", choices=tuple(_SYSTEMS), default="tasuki")
    r.add_argument("--job", choices=("noop", "cpu"), default="noop")
    r.add_argument("--jobs", type=int, default=2000)
    r.add_argument("-c", "--concurrency", type=int, default=8)
    r.add_argument("--spin", type=int, default=27000)
    s = sub.add_parser("spin", help="the bare loop in --procs processes at once")
    s.add_argument("--spin", type=int, default=27000)
    s.add_argument("--reps", type=int, default=1000)
    s.add_argument("--procs", type=int, default=1)
    args = parser.parse_args()
    (run if args.what == "run" else spin_pair)(args)


if __name__ == "__main__":
    main()
