"""Flow control as a job declares it: priorities, rate and concurrency limits, checked at
declaration and stamped on each message by the producer (DESIGN §4b)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import tasuki
from tasuki.backends.memory import MemoryBackend
from tasuki.core.admission import START_MARGIN, limits_of
from tasuki.core.message import Message
from tasuki.errors import ConfigurationError, InvalidArgument


def lacking(**caps: bool) -> MemoryBackend:
    backend = MemoryBackend()
    backend.capabilities = dataclasses.replace(backend.capabilities, **caps)  # type: ignore[misc]
    return backend


@pytest.fixture
def app() -> tasuki.App:
    return tasuki.App("memory://")


def leased_ids(app: tasuki.App, queue: str = "default") -> list[str]:
    return [d.id for d in app.backend.lease(queue, 100, 30.0)]


@pytest.mark.parametrize("bad", [-1, 10, 5.0, "5", True, None])
def test_a_priority_is_an_int_from_0_to_9(app: tasuki.App, bad: Any) -> None:
    with pytest.raises(InvalidArgument, match="priority"):
        app.job(name="declared", priority=bad)(lambda: None)
    job = app.job(name="fine")(lambda: None)
    if bad is not None:  # options(priority=None) means "the job's own"
        with pytest.raises(InvalidArgument, match="priority"):
            job.options(priority=bad)


def test_the_job_gives_the_default_and_options_the_exception(app: tasuki.App) -> None:
    @app.job(priority=5)
    def urgent(n: int) -> None: ...

    @app.job
    def plain(n: int) -> None: ...

    low = plain.enqueue(1)
    mid = urgent.enqueue(2)
    top = plain.options(priority=9).enqueue(3)
    bottom = urgent.options(priority=0).enqueue(4)
    assert leased_ids(app) == [top, mid, low, bottom]
    assert app.inspect("default", mid).priority == 5


def test_priorities_are_refused_where_the_backend_lacks_them() -> None:
    app = tasuki.App(backend=lacking(priorities=False))
    with pytest.raises(
        ConfigurationError, match=r"memory:// cannot .* it lacks the priorities capability"
    ):
        app.job(name="urgent", priority=5)(lambda: None)
    plain = app.job(name="plain", priority=0)(lambda: None)  # the default: nothing to refuse
    with pytest.raises(ConfigurationError, match="priorities"):
        plain.options(priority=3).enqueue()
    assert app.stats()["ready"] == 0
    plain.options(priority=0).enqueue()
    assert app.stats()["ready"] == 1


@pytest.mark.parametrize(
    "option, capability",
    [
        ({"rate_limit": tasuki.RateLimit(5, per=1.0)}, "rate_limits"),
        ({"concurrency_limit": tasuki.ConcurrencyLimit(2)}, "concurrency_limits"),
    ],
)
def test_limits_are_refused_where_the_backend_lacks_them(
    option: dict[str, Any], capability: str
) -> None:
    app = tasuki.App(backend=lacking(**{capability: False}))
    with pytest.raises(ConfigurationError, match=f"lacks the {capability} capability"):
        app.job(name="limited", **option)(lambda: None)
    assert "limited" not in app.jobs


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda: tasuki.RateLimit(0, per=1.0), "n >= 1"),
        (lambda: tasuki.RateLimit(True, per=1.0), "n >= 1"),
        (lambda: tasuki.RateLimit(2.5, per=1.0), "n >= 1"),
        (lambda: tasuki.RateLimit(5, per=0), "per"),
        (lambda: tasuki.RateLimit(5, per=float("nan")), "per"),
        (lambda: tasuki.RateLimit(5, per=float("inf")), "per"),
        (lambda: tasuki.RateLimit(5, per="1s"), "per"),
        (lambda: tasuki.RateLimit(5, key="customer"), "callable"),
        (lambda: tasuki.ConcurrencyLimit(0), "n >= 1"),
        (lambda: tasuki.ConcurrencyLimit(2, key=3), "callable"),
        (lambda: tasuki.ConcurrencyLimit(2, name=""), "name"),
        (lambda: tasuki.ConcurrencyLimit(2, name="x" * 300), "name"),
    ],
)
def test_limits_are_validated_when_made(make: Any, needle: str) -> None:
    with pytest.raises(InvalidArgument, match=needle):
        make()


def test_a_limit_option_must_be_a_limit(app: tasuki.App) -> None:
    with pytest.raises(InvalidArgument, match="rate_limit must be a tasuki\\.RateLimit"):
        app.job(name="a", rate_limit=5)(lambda: None)
    with pytest.raises(InvalidArgument, match="concurrency_limit must be"):
        app.job(name="b", concurrency_limit=tasuki.RateLimit(2))(lambda: None)


def test_limit_keys_belong_to_their_job_unless_named_alike(app: tasuki.App) -> None:
    one = tasuki.ConcurrencyLimit(1)
    shared = tasuki.ConcurrencyLimit(1, name="billing-api")

    @app.job(concurrency_limit=one)
    def first() -> None: ...

    @app.job(concurrency_limit=one)  # the same value, but another job: another limit
    def second() -> None: ...

    @app.job(concurrency_limit=shared)
    def charge() -> None: ...

    @app.job(concurrency_limit=shared)
    def refund() -> None: ...

    ids = {job.name: job.enqueue() for job in (first, second, charge, refund)}
    running = set(leased_ids(app))
    assert {ids["first"], ids["second"]} <= running  # one limit each
    assert len(running & {ids["charge"], ids["refund"]}) == 1  # one limit for both


def test_keys_are_made_from_the_message_at_enqueue(app: tasuki.App) -> None:
    @app.job(
        rate_limit=tasuki.RateLimit(100, per=60.0, key=lambda m: m.kwargs["customer"]),
        concurrency_limit=tasuki.ConcurrencyLimit(1, key=lambda m: m.kwargs["tenant"]),
    )
    def sync_account(customer: str, tenant: str) -> None: ...

    sync_account.enqueue(customer="acme", tenant="t1")
    sync_account.enqueue(customer="acme", tenant="t1")
    sync_account.enqueue(customer="acme", tenant="t2")
    assert len(leased_ids(app)) == 2  # one per tenant
    message = Message(
        "m1", "default", b"", job="sync_account", kwargs={"customer": "c", "tenant": "t"}
    )
    keys = [
        (limit.key, limit.kind, limit.limit, limit.per)
        for limit in limits_of(sync_account, message)
    ]
    assert keys == [
        # The window as the backend counts it: the job's own, and the start margin.
        ("rate:default:sync_account:c", "rate", 100, 60.0 + START_MARGIN),
        ("concurrency:default:sync_account:t", "concurrency", 1, 0.0),
    ]


def test_a_limit_is_per_queue(app: tasuki.App) -> None:
    """The same job on two queues counts against two limits (state beside each queue)."""

    @app.job(concurrency_limit=tasuki.ConcurrencyLimit(1))
    def one_at_a_time() -> None: ...

    one_at_a_time.enqueue()
    one_at_a_time.options(queue="other").enqueue()
    assert len(app.backend.lease("default", 10, 30.0)) == 1
    assert len(app.backend.lease("other", 10, 30.0)) == 1


def test_a_job_name_cannot_spell_another_jobs_key(app: tasuki.App) -> None:
    """Job "a:b" (no key) and job "a" with key "b" are different limits."""

    @app.job(name="a:b", concurrency_limit=tasuki.ConcurrencyLimit(1))
    def colon() -> None: ...

    @app.job(name="a", concurrency_limit=tasuki.ConcurrencyLimit(1, key=lambda m: "b"))
    def keyed() -> None: ...

    colon.enqueue()
    keyed.enqueue()
    assert len(leased_ids(app)) == 2


@pytest.mark.parametrize(
    "key, needle",
    [
        (lambda m: m.kwargs["tenant"], "raised KeyError"),
        (lambda m: 42, "must return a non-empty str"),
        (lambda m: "", "must return a non-empty str"),
    ],
)
def test_a_bad_key_fails_the_enqueue_naming_the_job(app: tasuki.App, key: Any, needle: str) -> None:
    @app.job(concurrency_limit=tasuki.ConcurrencyLimit(1, key=key))
    def keyed(**kwargs: Any) -> None: ...

    with pytest.raises(InvalidArgument, match=needle) as refused:
        keyed.enqueue(customer="x")
    assert "job 'keyed'" in str(refused.value)
    assert app.stats()["ready"] == 0


def test_jobs_sharing_a_named_limit_must_agree_on_it(app: tasuki.App) -> None:
    app.job(name="charge", rate_limit=tasuki.RateLimit(100, per=60.0, name="stripe"))(lambda: None)
    with pytest.raises(
        ConfigurationError, match=r"'stripe' with job 'charge'.*100 per 1s vs 100 per 60s"
    ):
        app.job(name="refund", rate_limit=tasuki.RateLimit(100, per=1.0, name="stripe"))(
            lambda: None
        )
    app.job(name="payout", rate_limit=tasuki.RateLimit(100, per=60.0, name="stripe"))(lambda: None)


def test_a_consumers_limits_apply_to_raw_messages(app: tasuki.App) -> None:
    @app.consumer(
        "events", concurrency_limit=tasuki.ConcurrencyLimit(1, key=lambda m: m.json()["t"])
    )
    def on_event(message: tasuki.Message) -> None: ...

    for tenant in ("a", "a", "b"):
        app.send("events", f'{{"t": "{tenant}"}}')
    assert len(leased_ids(app, "events")) == 2


def test_priority_aging_is_the_backends_setting() -> None:
    backend = MemoryBackend()
    assert tasuki.App(backend=backend).backend.priority_aging == 300.0
    assert tasuki.App(backend=backend, priority_aging=30).backend.priority_aging == 30.0
    tasuki.App(backend=backend)  # None leaves what was set
    assert backend.priority_aging == 30.0
    for bad in (0, -1.0, float("inf"), float("nan"), "300", True):
        with pytest.raises(InvalidArgument, match="priority_aging"):
            tasuki.App(backend=backend, priority_aging=bad)
