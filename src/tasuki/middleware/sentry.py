"""Failed runs to Sentry (extra `tasuki[sentry]`), tagged with what finds the message again.

    import sentry_sdk
    sentry_sdk.init(dsn="https://...")        # before the worker starts
    app.middleware.insert_before("Logging", SentryErrors())                # each failed attempt
    app.middleware.insert_before("Logging", SentryErrors(only_final=True)) # dead letters only

One event per failed attempt (a retry is a warning, a dead letter an error), or with
`only_final=True` one per dead letter, each with the exception and its traceback, and
as tags: `tasuki.queue`, `tasuki.job`, `tasuki.message_id`, `tasuki.attempt`,
`tasuki.outcome` and, when the message carries a W3C `traceparent`, `trace_id`: the
trace of the request that enqueued it (see the `TraceContext` middleware). The rest of
what tasuki knows is in the event's `tasuki` context (reason, delay, attempt limit,
fencing number).

sentry-sdk's logging integration, on by default, would send the worker's own
"dead-lettered" log line as a second event for the same failure: those lines are
dropped while a `SentryErrors` is installed, for the runs it reports. Messages that
never ran (undecodable, unknown job, out of attempts because their worker died) are not
runs: their "dead-lettered" line still reaches Sentry through that integration.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tasuki import logs
from tasuki.errors import TasukiError
from tasuki.middleware.errors import ReportErrors
from tasuki.middleware.tracing import TRACEPARENT

if TYPE_CHECKING:
    from tasuki.core.context import Context
    from tasuki.middleware.base import Outcome

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")
# The log lines of failed runs (middleware/logging.py) that an event here replaces.
_REPLACED: set[str] = set()
_installed = False


def _sentry() -> Any:
    try:
        import sentry_sdk
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise TasukiError("SentryErrors needs sentry-sdk: pip install 'tasuki[sentry]'") from exc
    return sentry_sdk


def trace_id(headers: Mapping[str, str]) -> str | None:
    """The trace id of a W3C `traceparent` header, if the message carries a valid one."""
    found = _TRACEPARENT.match(headers.get(TRACEPARENT, "").strip().lower())
    if found is None or found.group(1) == "0" * 32:
        return None
    return found.group(1)


def _drop_replaced_log_events(event: Any, hint: Any) -> Any:
    """An event processor: the logging integration's event for a failed run's log line
    goes, since `SentryErrors` sends a richer one. A run's lines carry its `duration`
    (middleware/logging.py); a burial without a run (a poison message) has none."""
    record = (hint or {}).get("log_record")
    if (
        record is not None
        and record.name == "tasuki"
        and logs.event_name(record) in _REPLACED
        and "duration" in getattr(record, "tasuki", {})
    ):
        return None
    return event


class SentryErrors(ReportErrors):
    """Reports failed runs to the Sentry client that `sentry_sdk.init` set up."""

    def __init__(self, *, only_final: bool = False) -> None:
        """`only_final`: report only failures that dead-lettered the message, not retries."""
        global _installed
        sentry_sdk = _sentry()
        super().__init__(self._capture, only_final=only_final)
        _REPLACED.update({"dead-lettered"} if only_final else {"dead-lettered", "retry scheduled"})
        if not _installed:
            sentry_sdk.get_global_scope().add_event_processor(_drop_replaced_log_events)
            _installed = True

    def _capture(self, error: BaseException, ctx: Context, outcome: Outcome) -> None:
        sentry_sdk = _sentry()
        m = ctx.message
        job = m.job or (ctx.job.name if ctx.job is not None else "-")
        action = outcome.action or "retry"
        tags = {
            "tasuki.queue": m.queue,
            "tasuki.job": job,
            "tasuki.message_id": m.id,
            "tasuki.attempt": str(m.attempt),
            "tasuki.outcome": action,
        }
        trace = trace_id(m.headers)
        if trace is not None:
            tags["trace_id"] = trace
        details: dict[str, Any] = {
            **{key.removeprefix("tasuki."): value for key, value in tags.items()},
            "reason": outcome.reason,
            "fencing_token": ctx.fencing_token,
        }
        if ctx.job is not None:
            details["max_attempts"] = ctx.job.retry.max_attempts
        if action == "retry":
            details["retry_in"] = outcome.delay
        sentry_sdk.capture_exception(
            error,
            level="error" if action == "dead" else "warning",
            tags=tags,
            contexts={"tasuki": details},
        )
