"""Declaring a job: how `@app.job`, `@app.consumer` and `@app.periodic` turn a function
and its options into a `Job`.

Every option is checked here, at import time of the user's module, so a mistake (an
unknown option, a policy of the wrong type, a capability the backend lacks) fails the
deploy at once instead of the first message that needs it.
"""

from __future__ import annotations

from typing import Any

from tasuki.backends.base import DEFAULT_VISIBILITY_TIMEOUT, Backend
from tasuki.core.admission import OPTIONS as ADMISSION_OPTIONS
from tasuki.core.admission import admission_options, check_shared
from tasuki.core.capabilities import ANOTHER_BACKEND
from tasuki.core.job import EXECUTORS, Job
from tasuki.core.policies import Dedup, Retry, Unique
from tasuki.core.registry import Registry
from tasuki.core.results import check_keep_result
from tasuki.errors import ConfigurationError, InvalidArgument
from tasuki.middleware import MessageGroups
from tasuki.middleware.base import MiddlewareChain
from tasuki.producer import Producer

# The options the App itself reads; any other must be owned by an installed middleware.
CORE_OPTIONS = (
    frozenset(
        {
            "queue",
            "retry",
            "timeout",
            "visibility_timeout",
            "dedup",
            "unique",
            "on_exhausted",
            "name",
            "executor",
            "keep_result",
        }
    )
    | ADMISSION_OPTIONS
)


def declare(
    fn: Any,
    options: dict[str, Any],
    *,
    consumer: bool,
    backend: Backend,
    producer: Producer,
    middleware: MiddlewareChain,
    registry: Registry,
    default_queue: str,
    has_locks: bool,
) -> Job[..., Any]:
    """`fn` as a Job of `registry` with `options`, checked against the installed
    `middleware` and `backend`'s capabilities; `has_locks` says a lock store was given
    to the App (dedup and uniqueness on a backend without locks of its own)."""
    if not callable(fn):
        raise InvalidArgument(f"a job must be a function, got {fn!r}")
    if "group" in options and "group" not in middleware.owned_options():
        # A FIFO message group is a plain header, which any backend carries and
        # sqs:// sends as MessageGroupId: its middleware comes with the first job
        # that names one, so `group=` works without installing anything.
        middleware.append(MessageGroups())
    unknown = set(options) - CORE_OPTIONS - middleware.owned_options()
    if unknown:
        raise ConfigurationError(
            f"unknown job option(s) {sorted(unknown)} for {getattr(fn, '__name__', fn)!r}; "
            "no installed middleware declares them"
        )
    name = options.get("name") or getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name:
        raise InvalidArgument(f"cannot name job {fn!r}: pass name=...")
    if name in registry.jobs:
        raise ConfigurationError(f"a job named {name!r} is already registered on this app")
    retry = options.get("retry")
    if retry is None:
        retry = Retry()
    elif not isinstance(retry, Retry):
        raise InvalidArgument(f"retry must be a tasuki.Retry, got {retry!r}")
    dedup = options.get("dedup")
    if dedup is True:
        dedup = Dedup()
    elif dedup is False:
        dedup = None
    elif dedup is not None and not isinstance(dedup, Dedup):
        raise InvalidArgument(f"dedup must be True, False or a tasuki.Dedup, got {dedup!r}")
    unique = options.get("unique")
    if unique is not None and not isinstance(unique, Unique):
        raise InvalidArgument(f"unique must be a tasuki.Unique or None, got {unique!r}")
    timeout = options.get("timeout")
    if timeout is not None and (not isinstance(timeout, int | float) or timeout <= 0):
        raise InvalidArgument(f"timeout must be a positive number of seconds, got {timeout!r}")
    vt = options.get("visibility_timeout", DEFAULT_VISIBILITY_TIMEOUT)
    if not isinstance(vt, int | float) or vt <= 0:
        raise InvalidArgument(f"visibility_timeout must be > 0 seconds, got {vt!r}")
    on_exhausted = options.get("on_exhausted")
    if on_exhausted is not None and not callable(on_exhausted):
        raise InvalidArgument("on_exhausted must be callable(message, error)")
    executor = options.get("executor", "auto")
    if executor not in EXECUTORS:
        raise InvalidArgument(f"executor must be one of {EXECUTORS}, got {executor!r}")
    check_capabilities(backend, name, dedup, unique, has_locks)
    scheme = backend.scheme
    admission = admission_options(name, options, backend.capabilities, scheme)
    check_shared(name, admission, registry.jobs.values())
    job: Job[..., Any] = Job(
        producer,
        fn,
        name=name,
        queue=default_queue if options.get("queue") is None else options["queue"],
        retry=retry,
        timeout=float(timeout) if timeout is not None else None,
        visibility_timeout=float(vt),
        dedup=dedup,
        unique=unique,
        on_exhausted=on_exhausted,
        executor=executor,
        consumer=consumer,
        extra={k: v for k, v in options.items() if k not in CORE_OPTIONS},
        priority=admission.priority,
        rate_limit=admission.rate_limit,
        concurrency_limit=admission.concurrency_limit,
        keep_result=check_keep_result(
            name, options.get("keep_result"), backend.capabilities.results, scheme
        ),
    )
    registry.add(job)
    return job


def check_capabilities(
    backend: Backend, name: str, dedup: Dedup | None, unique: Unique | None, has_locks: bool
) -> None:
    """Refuse now, naming the missing capability, what the backend could not keep later."""
    wanted = "dedup" if dedup is not None else "unique" if unique is not None else None
    if wanted and not has_locks:
        backend.require(
            "native_locks",
            f"keep job {name!r}'s {wanted} without a lock store",
            "pass locks=... (a redis:// or sqlite:/// URL) to the App or the backend URL",
        )
    # Without atomic_unique (SQS) the backend claims the key just before the send
    # (docs/uniqueness.md says the window), so every mode works; what it cannot do is
    # reach into a waiting message to change its payload.
    if unique is not None and unique.mode != "while_executing" and unique.on_conflict == "replace":
        backend.require(
            "atomic_unique",
            f"keep job {name!r}'s unique on_conflict='replace' (it rewrites the waiting "
            "copy's arguments atomically with the enqueue; SQS cannot change a waiting "
            "message)",
            "use on_conflict='drop', 'raise' or 'reschedule', or " + ANOTHER_BACKEND,
        )
