"""Prometheus metrics: what happened to every message, how long runs took, how deep queues are.

Needs the `metrics` extra (prometheus-client). Install it as the outermost middleware so
that it counts final decisions (a retry decided by `Retries`, a skip by `DedupGuard`):

    app.middleware.insert_before("Logging", Metrics())

or let `tasuki worker --metrics-port 9100` do that and serve `/metrics`. Queue depth is
read from the backend when Prometheus scrapes, never on the hot path.

| metric | type | labels |
|---|---|---|
| `tasuki_enqueued_total` | counter | queue, job, status (enqueued, duplicate, conflict, replaced) |
| `tasuki_runs_total` | counter | queue, job, outcome (ack, skip, defer, retry, dead) |
| `tasuki_run_seconds` | histogram | queue, job |
| `tasuki_redeliveries_total` | counter | queue, job: runs of an attempt after the first |
| `tasuki_duplicates_skipped_total` | counter | queue, job: deliveries the dedup guard skipped |
| `tasuki_leases_lost_total` | counter | queue, job: leases the backend refused to extend |
| `tasuki_heartbeat_lag_seconds` | histogram | queue: how late each lease extension was |
| `tasuki_lease_expiry_to_start_seconds` | histogram | queue: lost lease's expiry to next start |
| `tasuki_queue_messages` | gauge | queue, state (ready, in_flight, delayed, dead) |
| `tasuki_queue_oldest_ready_seconds` | gauge | queue |

The reliability metrics come from the lease keeper (`lease_extended`, `lease_lost`) and,
for the time from expiry to the next start, from the message's history: a redelivery
(attempt > 1) asks the backend (`inspect`, one round trip, redeliveries only) whether
the lease before it was lost, and when it expired. That needs the backend, which
`serve()` hands over; `Metrics(backend=...)` does it by hand.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from tasuki import logs
from tasuki.errors import TasukiError
from tasuki.middleware.base import EnqueueNext, ExecuteHook, Middleware, Outgoing

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import Metric

    from tasuki.backends.base import Backend, Enqueued
    from tasuki.core.context import Context
    from tasuki.middleware.base import MiddlewareChain

# Run times of background jobs span milliseconds to many minutes.
BUCKETS = (0.001, 0.005, 0.025, 0.1, 0.25, 1.0, 2.5, 10.0, 30.0, 120.0, 600.0, float("inf"))
# An extension is planned a third into the lease: late by a second is already a warning.
LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, float("inf"))
# From a crash to the redelivery: up to a poll interval past expiry, or a backlog later.
RECOVERY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, float("inf"))


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise TasukiError("metrics need prometheus-client: pip install 'tasuki[metrics]'") from exc
    return prometheus_client


class Metrics(Middleware):
    """Counts enqueues and runs by outcome; times runs. One per registry."""

    def __init__(
        self, registry: CollectorRegistry | None = None, backend: Backend | None = None
    ) -> None:
        prom = _prometheus()
        self.backend = backend
        self.registry = registry if registry is not None else prom.REGISTRY
        labels = ("queue", "job")
        self.enqueued = prom.Counter(
            "tasuki_enqueued", "Messages offered to a queue, by the backend's verdict.",
            (*labels, "status"), registry=self.registry,
        )  # fmt: skip
        self.runs = prom.Counter(
            "tasuki_runs", "Deliveries that reached the worker, by what became of them.",
            (*labels, "outcome"), registry=self.registry,
        )  # fmt: skip
        self.seconds = prom.Histogram(
            "tasuki_run_seconds", "Time from a delivery's start to its outcome.",
            labels, buckets=BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.redeliveries = prom.Counter(
            "tasuki_redeliveries", "Runs of an attempt after the first (retries, crashes).",
            labels, registry=self.registry,
        )  # fmt: skip
        self.duplicates = prom.Counter(
            "tasuki_duplicates_skipped", "Duplicate deliveries the dedup guard skipped.",
            labels, registry=self.registry,
        )  # fmt: skip
        self.leases_lost = prom.Counter(
            "tasuki_leases_lost", "Leases the backend refused to extend while their job ran.",
            labels, registry=self.registry,
        )  # fmt: skip
        self.heartbeat_lag = prom.Histogram(
            "tasuki_heartbeat_lag_seconds", "How late each lease extension was.",
            ("queue",), buckets=LAG_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.expiry_to_start = prom.Histogram(
            "tasuki_lease_expiry_to_start_seconds",
            "From a lost lease's expiry to the next start of its message.",
            ("queue",), buckets=RECOVERY_BUCKETS, registry=self.registry,
        )  # fmt: skip

    def enqueue(self, messages: list[Outgoing], call_next: EnqueueNext) -> list[Enqueued]:
        results = call_next(messages)
        for d, r in zip(messages, results, strict=True):
            job = d.job.name if d.job is not None else "-"
            self.enqueued.labels(d.queue, job, r.status).inc()
        return results

    def execute(self, ctx: Context) -> ExecuteHook:
        m = ctx.message
        job = m.job or (ctx.job.name if ctx.job is not None else "-")
        if m.attempt > 1:
            self.redeliveries.labels(m.queue, job).inc()
            self._after_lost_lease(ctx)
        started = time.perf_counter()
        outcome = yield
        action = outcome.action or ("ack" if outcome.error is None else "retry")
        self.runs.labels(m.queue, job, action).inc()
        self.seconds.labels(m.queue, job).observe(time.perf_counter() - started)
        if action == "skip" and outcome.reason.startswith("duplicate"):
            self.duplicates.labels(m.queue, job).inc()

    def lease_extended(self, ctx: Context, lag: float) -> None:
        self.heartbeat_lag.labels(ctx.message.queue).observe(lag)

    def lease_lost(self, ctx: Context) -> None:
        m = ctx.message
        job = m.job or (ctx.job.name if ctx.job is not None else "-")
        self.leases_lost.labels(m.queue, job).inc()

    def _after_lost_lease(self, ctx: Context) -> None:
        """A redelivery whose previous lease was lost: time from its expiry to now."""
        backend, m = self.backend, ctx.message
        if backend is None or m.lease is None or not backend.capabilities.inspection:
            return
        try:
            history = backend.inspect(m.queue, m.id).history
        except TasukiError as exc:
            logs.logger.warning("metrics: inspect of message %s failed: %s", m.id, exc)
            return
        before = next(
            (h for h in reversed(history) if h.fencing_token == m.lease.fencing_token - 1), None
        )
        if before is not None and before.event == "lease lost":
            self.expiry_to_start.labels(m.queue).observe(max(0.0, time.time() - before.at))


class QueueCollector:
    """Queue depth and oldest-ready age, read from the backend at scrape time.

    `leases_lost` is a callable so that a worker can report its own count (as
    `tasuki_leases_lost_total` without labels; `serve()` leaves it out, the `Metrics`
    middleware counting them by queue and job).
    """

    def __init__(
        self,
        backend: Backend,
        queues: Callable[[], Iterable[str]],
        leases_lost: Callable[[], int] | None = None,
    ) -> None:
        self.backend = backend
        self.queues = queues
        self.leases_lost = leases_lost

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        depth = GaugeMetricFamily(
            "tasuki_queue_messages", "Messages in a queue, by state.", labels=("queue", "state")
        )
        oldest = GaugeMetricFamily(
            "tasuki_queue_oldest_ready_seconds",
            "How long the oldest ready message has waited.",
            labels=("queue",),
        )
        paused = GaugeMetricFamily(
            "tasuki_queue_paused", "1 while the queue is paused (`app.pause`).", labels=("queue",)
        )
        held: set[str] | None = None
        if self.backend.capabilities.pause:
            try:
                held = self.backend.paused()
            except TasukiError as exc:
                logs.logger.warning("metrics: the paused queues could not be read: %s", exc)
        for queue in self.queues():
            if held is not None:
                paused.add_metric((queue,), 1.0 if queue in held else 0.0)
            try:
                s = self.backend.stats(queue)
            except TasukiError as exc:
                logs.logger.warning("metrics: stats of queue %r failed: %s", queue, exc)
                continue
            for state in ("ready", "in_flight", "delayed", "dead"):
                depth.add_metric((queue, state), getattr(s, state))
            oldest.add_metric((queue,), s.oldest_ready_age)
        yield depth
        yield oldest
        if held is not None:
            yield paused
        if self.leases_lost is not None:
            lost = CounterMetricFamily(
                "tasuki_leases_lost", "Leases this worker lost while their job ran."
            )
            lost.add_metric((), self.leases_lost())
            yield lost

    def describe(self) -> list[Metric]:
        return []  # collected on demand: no fixed description to check at register time


def install(
    chain: MiddlewareChain,
    backend: Backend,
    *,
    queues: Callable[[], Iterable[str]],
    queue_gauges: bool = True,
) -> Metrics:
    """Install `Metrics` outermost (once), and the queue gauges read at scrape time
    (unless `queue_gauges` is false: a worker of a group leaves them to one registry)."""
    installed = next((m for m in chain if isinstance(m, Metrics)), None)
    if installed is None:
        installed = Metrics(backend=backend)
        first = next(iter(chain), None)
        if first is None:
            chain.append(installed)
        else:
            chain.insert_before(first, installed)
    if installed.backend is None:
        installed.backend = backend
    # Leases lost are counted by the middleware, by queue and job.
    if queue_gauges:
        installed.registry.register(QueueCollector(backend, queues))
    return installed


def metrics_app(installed: Metrics) -> Callable[..., Any]:
    """The WSGI app that serves `installed`'s registry (what `/metrics` answers)."""
    return _prometheus().make_wsgi_app(installed.registry)  # type: ignore[no-any-return]


def serve(
    chain: MiddlewareChain,
    backend: Backend,
    port: int,
    host: str = "127.0.0.1",
    *,
    queues: Callable[[], Iterable[str]],
) -> Metrics:
    """Install `Metrics` (see `install`) and serve `/metrics` on host:port in a thread.

    `tasuki worker --metrics-port` serves the same and the health checks beside it
    (`tasuki.runtime.probes`)."""
    prom = _prometheus()
    installed = install(chain, backend, queues=queues)
    try:
        prom.start_http_server(port, addr=host, registry=installed.registry)
    except OSError as exc:
        raise TasukiError(f"cannot serve metrics on {host}:{port}: {exc}") from exc
    return installed
