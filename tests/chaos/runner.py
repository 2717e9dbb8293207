"""`./dev chaos [BACKEND...] [--jobs N] [--workers M] [--duration S] [--faults ...] [--seed N]
[--durable] [--max-faults N]`

For each backend: start its store, M worker processes (through a misbehaving proxy
where network faults apply), and a producer enqueueing N jobs during the first 80% of
the run; do random faults, drawn from a seeded generator, for S seconds; then let the
workers drain the queue and check the records (a sampler process measures, from outside,
when a worker could not run). One summary line per backend; exit status 1 on any loss,
unexplained duplicate, fencing token that went back or unparsable record line. With
`--durable`, half the thread jobs are durable ones (steps, a sleep, a signal the runner
sends, a transactional step on SQL backends) where the backend has `durable_steps`, and
a recorded step run again or a transactional write made twice fails the run too.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

import tasuki
from tasuki.backends.base import Capabilities
from tasuki.errors import BackendUnavailable
from tests.chaos import jobs
from tests.chaos.backends import BACKENDS, BY_NAME, KINDS, ChaosBackend
from tests.chaos.checker import Report, check
from tests.chaos.composite import check_flows, check_limits, probe_slots
from tests.chaos.durable import check_durable, ends
from tests.chaos.durable_driver import Signaller, effects, prepare_effects, stale_copies
from tests.chaos.faults import Fault, Injector, Pool
from tests.chaos.proxy import Proxy
from tests.chaos.recorder import (
    executions,
    keeper_notes,
    lease_expiries,
    lease_floors,
    leases,
    probes,
    read,
    stalls,
)
from tests.chaos.sampler import start_sampler, stop_sampler

# Every FLOW_EVERY-th job number starts a chord (of FLOW_MEMBERS members unless asked
# otherwise, at most 9,999: `member_number`); LIMITED_SHARE of
# the others run under a tenant's concurrency limit (where the backend has them).
FLOW_EVERY = 10
FLOW_MEMBERS = 6
LIMITED_SHARE = 0.25


@dataclass
class Options:
    jobs: int = 300
    workers: int = 3
    duration: float = 20.0
    faults: list[str] = field(default_factory=lambda: list(KINDS))
    seed: int = 1
    vt: float = 2.0
    concurrency: int = 4
    settle: float = 60.0  # how long the drain after the faults may take
    pause: tuple[float, float] = (0.2, 1.0)  # between two faults
    verbose: bool = True
    cover: bool = False  # go on past `duration` until every fault kind was done once
    chord_members: int = FLOW_MEMBERS
    durable: bool = False  # mix in durable jobs, where the backend has durable steps
    max_faults: int | None = None  # end the faults after this many, even before `duration`


class Producer(threading.Thread):
    """Enqueues jobs 0..N-1 with ids of their own, retrying each until it is stored.

    Where the backend has them, some numbers start a chord instead (`members`
    members numbered `member_number(n, i)`, then `gather` numbered n) and some run under
    a tenant's concurrency limit (`limited`)."""

    def __init__(
        self,
        app: tasuki.App,
        total: int,
        spread: float,
        rng: random.Random,
        members: int = FLOW_MEMBERS,
        signaller: Signaller | None = None,
        transactional: bool = False,
    ):
        super().__init__(name="chaos-producer", daemon=True)
        self.app, self.total, self.spread, self.members = app, total, spread, members
        caps = app.backend.capabilities
        self.signaller = signaller
        self.plan = [_job_for(n, rng, caps, signaller is not None) for n in range(total)]
        # A durable job's number -> (its sleep, whether its signal goes early, how long
        # after its enqueue a late one goes, whether it takes the transactional step).
        self.durable_plan = {
            n: (rng.uniform(0.2, 1.0), rng.random() < 0.5, rng.uniform(1.0, 3.0), transactional)
            for n, (job, _) in enumerate(self.plan)
            if job == "durable"
        }
        self.enqueued: list[int] = []
        self.flows: dict[int, list[int]] = {}  # a chord's number -> its members' numbers
        self.errors = 0
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            self._produce()
        except BaseException as exc:
            self.failure = exc
            raise

    def _produce(self) -> None:
        began = time.monotonic()
        for n, (job, sleep) in enumerate(self.plan):
            while True:
                try:
                    self._enqueue(n, job, sleep)
                    break
                except BackendUnavailable:
                    # The faults at work: the same id makes the retry idempotent. Any
                    # other error is the run's own mistake and ends it (never loop on it).
                    self.errors += 1
                    time.sleep(0.1)
            if job == "flow":
                self.flows[n] = [member_number(n, i) for i in range(self.members)]
                self.enqueued += self.flows[n]
            self.enqueued.append(n)
            ahead = began + self.spread * (n + 1) / self.total - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)

    def _enqueue(self, n: int, job: str, sleep: float) -> None:
        jobs_ = self.app.jobs
        if job == "flow":
            members = [
                jobs_["member"].step(member_number(n, i), sleep) for i in range(self.members)
            ]
            flow = tasuki.chain(tasuki.group(members), jobs_["gather"].step(n))
            flow.options(message_id=f"f-{n}").enqueue()
        elif job == "durable":
            nap, early, delay, tx = self.durable_plan[n]
            jobs_[job].options(message_id=f"m-{n}").enqueue(n, sleep / 2, nap, tx)
            assert self.signaller is not None
            if early:
                self.signaller.send_now(n)
            else:
                self.signaller.later(n, delay)
        elif job == "limited":
            tenant = jobs.TENANTS[n % len(jobs.TENANTS)]
            jobs_[job].options(message_id=f"m-{n}").enqueue(n, sleep, tenant=tenant)
        else:
            jobs_[job].options(message_id=f"m-{n}").enqueue(n, sleep)


def member_number(n: int, i: int) -> int:
    """The record number of chord n's i-th member (apart from the job numbers)."""
    return 100_000_000 + n * 10_000 + i


def _job_for(n: int, rng: random.Random, caps: Capabilities, durable: bool) -> tuple[str, float]:
    job = "chaos_process" if n % 10 == 0 else "chaos"
    if caps.workflows and n % FLOW_EVERY == FLOW_EVERY // 2:
        job = "flow"
    elif durable and job == "chaos" and n % 2 == 1:
        job = "durable"
    elif caps.concurrency_limits and job == "chaos" and rng.random() < LIMITED_SHARE:
        job = "limited"
    if rng.random() < 0.1:
        return job, rng.uniform(2.0, 4.0)  # outlives a lease: needs its heartbeats
    return job, rng.uniform(0.02, 0.3)


def run_backend(backend: ChaosBackend, opts: Options, workdir: Path) -> Report:
    rng = random.Random(f"{opts.seed}-{backend.name}")
    log = workdir / "executions.jsonl"
    service = backend.start(workdir)
    proxy = None
    pool = None
    producer_app = None
    sampler = None
    faults: list[Fault] = []
    try:
        if "net" in opts.faults and "net" in backend.faults and service.port is not None:
            proxy = Proxy(service.port).start()
        url = service.worker_url(proxy.port if proxy else None)
        sampler = start_sampler(workdir / "pids.txt", log)
        pool = Pool(
            opts.workers,
            url,
            log,
            opts.vt,
            workdir / "workers.log",
            "-c",
            str(opts.concurrency),
            pids=workdir / "pids.txt",
        )
        producer_app = jobs.producer(service.url, opts.vt)
        caps = producer_app.backend.capabilities
        signaller = Signaller(producer_app) if opts.durable and caps.durable_steps else None
        transactional = (
            signaller is not None and caps.transactional_steps and prepare_effects(service)
        )
        producer = Producer(
            producer_app,
            opts.jobs,
            opts.duration * 0.8,
            rng,
            opts.chord_members,
            signaller,
            transactional,
        )
        if signaller is not None:
            signaller.start()
        producer.start()
        depth = Depth(producer_app)
        depth.start()
        injector = Injector(
            backend, service, pool, proxy, opts.vt, rng, opts.faults, interrupt_first=opts.cover
        )
        ends = time.monotonic() + opts.duration
        missing = injector.kinds() if opts.cover else set()
        while (
            injector.families
            and (time.monotonic() < ends or missing)
            and (opts.max_faults is None or len(faults) < opts.max_faults)
        ):
            time.sleep(rng.uniform(*opts.pause))
            fault = injector.one()
            faults.append(fault)
            missing.discard(fault.kind)
            if opts.verbose:
                print(
                    f"  {backend.name}: t={fault.start:.3f} {fault.kind} {fault.detail}".rstrip(),
                    flush=True,
                )
        producer.join()
        if producer.failure is not None:
            raise RuntimeError("the chaos producer failed") from producer.failure
        if signaller is not None:
            signaller.close()
        if proxy is not None:
            proxy.heal()
        stale = (lambda: stale_copies(service)) if signaller is not None else None
        drained, unsettled, left_stale = _drain(
            producer_app, log, producer.enqueued, opts.settle, stale
        )
        dead = len(producer_app.dead_letters("default"))
        depth.stop()
        stop_sampler(sampler)
        _write_faults(workdir / "faults.jsonl", faults)
        if signaller is not None:
            signaller.join(opts.settle)
            if signaller.failure is not None:
                raise RuntimeError("the chaos signaller failed") from signaller.failure
        records = read(log)
        durable = {n: plan[3] for n, plan in producer.durable_plan.items()}
        report = check(
            backend.name,
            [n for n in producer.enqueued if n not in durable],
            executions(records),
            faults,
            opts.vt,
            dead,
            stalls(records),
            keeper_notes(records, jobs.LATE),
            lease_expiries(records),
            records.unparsable,
            probes(records),
            leases(records),
        )
        report.drained, report.unsettled = drained, unsettled
        if left_stale:
            report.notes.append(
                f"  delayed copies of answered waits still in the queue (deleted unrun when"
                f" met): {left_stale}"
            )
        runs = executions(records)
        if signaller is not None:
            result = check_durable(
                report,
                durable,
                records,
                effects(service) if transactional else None,
                signaller.sent,
            )
            result.errors += [f"message {n}: signal answered unknown" for n in signaller.unknown]
        elif opts.durable:
            report.notes.append(f"  durable jobs not run: {backend.name} lacks durable_steps")
        if producer.flows or producer_app.backend.capabilities.workflows:
            check_flows(report, producer.flows, runs, drained)
        if producer_app.backend.capabilities.concurrency_limits:
            limited = {
                n: jobs.TENANTS[n % len(jobs.TENANTS)]
                for n, (job, _) in enumerate(producer.plan)
                if job == "limited"
            }
            check_limits(report, limited, runs, lease_floors(records), opts.vt)
            if drained:
                report.stuck_slots, probed = probe_slots(producer_app, log, opts.vt)
                report.notes += [f"  stuck-slot probe: {p}" for p in probed]
            else:
                report.notes.append("  stuck-slot probe not run: the queue did not drain")
        report.queued = [
            took
            for took, _, started in report.redelivered
            if depth.at(started) not in ("0", "unknown")
        ]
        report.notes += [
            f"  slow redelivery: message {n} after {took:.2f}s; ready when it started: "
            f"{depth.at(started)}"
            for took, n, started in report.slowest()
            if took > REDELIVERY
        ]
        report.notes += _what_happened(producer_app, report.lost[:5])
        if not report.ok:
            report.notes.append(f"  kept for a look: {_keep(workdir, backend.name)}")
        return report
    finally:
        stop_sampler(sampler)
        if pool is not None:
            pool.stop()
        if producer_app is not None:
            producer_app.close()
        if proxy is not None:
            proxy.stop()
        service.stop()


# The documented target: a message whose lease lapsed runs again within 2 s of the lapse
# (one lease + 2 s after its worker died), or of the end of the outage that caused it.
REDELIVERY = 2.0


class Depth(threading.Thread):
    """How many messages were ready, twice a second: a redelivered message waits its turn
    behind those, so a slow redelivery under a backlog is a queue, not a lost lease."""

    def __init__(self, app: tasuki.App) -> None:
        super().__init__(name="chaos-depth", daemon=True)
        self.app = app
        self.samples: list[tuple[float, int]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.5):
            try:
                ready = self.app.stats("default")["ready"]
            except tasuki.TasukiError:
                continue
            self.samples.append((time.time(), ready))

    def stop(self) -> None:
        self._halt.set()
        self.join(5.0)

    def at(self, t: float) -> str:
        before = [ready for when, ready in self.samples if when <= t]
        return str(before[-1]) if before else "unknown"


def _what_happened(app: tasuki.App, lost: list[int]) -> list[str]:
    """The backend's own account of a message the records say never finished."""
    out = []
    for n in lost:
        try:
            info = app.inspect("default", f"m-{n}")
        except tasuki.TasukiError as exc:
            out.append(f"  message {n}: inspect failed: {exc}")
            continue
        history = ", ".join(f"{h.event}@{h.at:.3f}#{h.fencing_token}" for h in info.history)
        out.append(
            f"  message {n}: {info.state}, attempt {info.attempt}, fence {info.fencing_token}, "
            f"visible at {info.visible_at}, lease until {info.lease_expires_at}, "
            f"history: {history or '-'}"
        )
    return out


def _write_faults(path: Path, faults: list[Fault]) -> None:
    """The faults, one JSON line each, kept with a failed run's records for a look."""
    with open(path, "wb") as out:
        for f in faults:
            workers = sorted(f.workers) if f.workers is not None else None
            line = {**dataclasses.asdict(f), "workers": workers}
            out.write(orjson.dumps(line) + b"\n")


def _keep(workdir: Path, name: str) -> Path:
    """A failed run's records and logs, copied out of its temporary directory."""
    kept = Path(tempfile.mkdtemp(prefix=f"chaos-kept-{name}-"))
    for path in workdir.iterdir():
        if path.is_file():
            shutil.copy2(path, kept / path.name)
    return kept


def _drain(
    app: tasuki.App,
    log: Path,
    enqueued: list[int],
    timeout: float,
    stale: Callable[[], int] | None = None,
) -> tuple[bool, int, int]:
    """Until every message ran to its end and the queue holds nothing (True), or `timeout`
    seconds passed without one more message reaching its end (False): a long run's
    backlog may take longer than `timeout` to work off, a stuck message never does.
    With it, how many messages the queue still held when every one had ended (each an
    end never settled), 0 when that is not known; and how many delayed copies it held
    that the backend left there on purpose (`stale`: SQS's copies of answered waits,
    deleted unrun when met), which are not counted as unsettled."""
    deadline = time.monotonic() + timeout
    want = set(enqueued)
    ended = 0
    left = 0
    while time.monotonic() < deadline:
        records = read(log)
        done = {n for n, runs in executions(records).items() if any(e.ended for e in runs)}
        done |= set(ends(records))
        if len(done) > ended:
            ended, deadline = len(done), time.monotonic() + timeout
        if want <= done:
            try:
                s = app.stats("default")
            except tasuki.TasukiError:
                s = None
            if s is not None:
                known = min(s["delayed"], stale()) if stale is not None and s["delayed"] else 0
                left = s["ready"] + s["in_flight"] + s["delayed"] - known
                if left == 0:
                    return True, 0, known
        time.sleep(0.5 if len(want) > 5000 else 0.2)
    return False, left, 0


def capabilities(backend: ChaosBackend, workdir: Path) -> Capabilities:
    """What the backend can do, asked of a store of its own started for the question:
    durable jobs go where `durable_steps` is, whatever the backend's name."""
    workdir.mkdir(parents=True, exist_ok=True)
    service = backend.start(workdir)
    try:
        app = tasuki.App(service.url)
        try:
            return app.backend.capabilities
        finally:
            app.close()
    finally:
        service.stop()


def run(names: list[str], opts: Options) -> list[Report]:
    reports = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"chaos-{name}-") as tmp:
            report = run_backend(BY_NAME[name], opts, Path(tmp))
        print(report.line(), flush=True)
        for line in report.details():
            print(line, flush=True)
        reports.append(report)
    return reports


def parse(argv: list[str]) -> tuple[list[str], Options]:
    p = argparse.ArgumentParser(prog="./dev chaos", description=__doc__.split("\n\n")[1])
    p.add_argument("backends", nargs="*", metavar="BACKEND", help=", ".join(BY_NAME))
    p.add_argument("--jobs", type=int, default=300)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument("--faults", default=",".join(KINDS), help="comma-separated: " + ",".join(KINDS))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--visibility-timeout", type=float, default=2.0)
    p.add_argument(
        "--chord-members",
        type=int,
        default=FLOW_MEMBERS,
        help="members of each chord (1-9999), where the backend has workflows",
    )
    p.add_argument(
        "--durable",
        action="store_true",
        help="mix in durable jobs (steps, sleeps, signals), where the backend has them",
    )
    p.add_argument("--max-faults", type=int, default=None, help="stop the faults after N")
    p.add_argument("--quiet", action="store_true", help="only the summary lines")
    a = p.parse_args(argv)
    names = a.backends or [b.name for b in BACKENDS if b.default]
    unknown = [n for n in names if n not in BY_NAME]
    families = [f for f in a.faults.split(",") if f]
    bad = [f for f in families if f not in KINDS]
    if unknown or bad:
        p.error(f"unknown backend(s) {unknown} or fault kind(s) {bad}")
    opts = Options(
        jobs=a.jobs,
        workers=a.workers,
        duration=a.duration,
        faults=families,
        seed=a.seed,
        vt=a.visibility_timeout,
        verbose=not a.quiet,
        chord_members=a.chord_members,
        durable=a.durable,
        max_faults=a.max_faults,
    )
    return names, opts


def main(argv: list[str] | None = None) -> int:
    names, opts = parse(sys.argv[1:] if argv is None else argv)
    print(
        f"chaos: seed={opts.seed} jobs={opts.jobs} workers={opts.workers} "
        f"duration={opts.duration}s faults={','.join(opts.faults)} vt={opts.vt}s"
        + (" durable" if opts.durable else ""),
        flush=True,
    )
    reports = run(names, opts)
    return 0 if all(r.ok for r in reports) else 1
