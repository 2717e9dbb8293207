"""Every exception tasuki raises, under one root so callers can catch them all at once.

Control-flow signals a job may raise (`Defer`, `Skip`) live here too: they are how a job
or a middleware tells the worker what to do with the message instead of succeeding.
"""

from __future__ import annotations

from typing import Protocol


class TasukiError(Exception):
    """Root of every tasuki exception."""


class ConfigurationError(TasukiError, ValueError):
    """The application was set up with something that cannot work."""


class InvalidURL(ConfigurationError):
    """A backend URL that tasuki cannot parse or does not support."""


class BackendError(TasukiError):
    """The backend failed to carry out an operation."""


class BackendUnavailable(BackendError, ConnectionError):
    """The backend cannot be reached or opened: unreachable server, unopenable file."""


class InvalidArgument(TasukiError, ValueError):
    """A call got an argument that makes no sense (negative delay, wrong type...)."""


class Unsupported(ConfigurationError, InvalidArgument):
    """Something the backend cannot do: `.capability` names the capability it lacks.

    Both a ConfigurationError (a job declared with what its backend cannot keep) and an
    InvalidArgument (a call the backend cannot answer), so code catching either, as
    earlier releases raised them, still catches it.
    """

    def __init__(self, message: str, capability: str) -> None:
        super().__init__(message)
        self.capability = capability


class SerializationError(TasukiError, TypeError):
    """A job's arguments cannot be encoded, or a body cannot be decoded."""


class MessageTooLarge(TasukiError, ValueError):
    """The encoded message exceeds the backend's maximum size; nothing was enqueued."""


class UnknownJob(TasukiError, LookupError):
    """No job of that name is registered on this app."""


class DuplicateJob(TasukiError):
    """A unique job is already waiting (raised at enqueue with `on_conflict="raise"`)."""

    def __init__(self, message: str, existing_id: str | None = None) -> None:
        super().__init__(message)
        self.existing_id = existing_id

    def __reduce__(self) -> tuple[type[DuplicateJob], tuple[str, str | None]]:
        return (type(self), (str(self), self.existing_id))


class JobTimeout(TasukiError, TimeoutError):
    """One attempt of a job ran longer than its `timeout`."""


class JobProcessDied(TasukiError):
    """The child process running a `executor="process"` job died before it answered."""


class RemoteJobError(TasukiError):
    """A process job raised an exception that could not be sent back as itself."""

    def __init__(self, type_name: str, message: str, traceback: str = "") -> None:
        super().__init__(f"{type_name}: {message}" if message else type_name)
        self.type_name = type_name
        self.remote_message = message
        self.remote_traceback = traceback
        if traceback:
            self.add_note(f"--- raised in the job process ---\n{traceback.rstrip()}")

    def __reduce__(self) -> tuple[type[RemoteJobError], tuple[str, str, str]]:
        return (type(self), (self.type_name, self.remote_message, self.remote_traceback))


class LeaseLost(TasukiError):
    """The worker's lease on a message was refused: another delivery now owns it."""


class SignatureError(SerializationError):
    """A message's HMAC signature is missing or wrong: the worker refuses it."""


class Defer(TasukiError):
    """Raise inside a job to release the message without penalty and run it again later.

    The attempt is given back, so deferring (e.g. on `ctx.should_stop`) never pushes a
    message toward the dead-letter queue.
    """

    def __init__(self, delay: float = 0.0, reason: str = "deferred") -> None:
        if delay < 0:
            raise InvalidArgument(f"Defer delay must be >= 0, got {delay!r}")
        super().__init__(reason)
        self.delay = float(delay)
        self.reason = reason


class SignalTimeout(TasukiError, TimeoutError):
    """Raised inside a job by `ctx.wait_for_signal` when no signal came within its timeout."""


class Skip(TasukiError):
    """Raise (usually from middleware) to acknowledge a message without running it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DrainTimeout(TasukiError, TimeoutError):
    """`tasuki.testing.drain` gave up: the queues were not idle within its timeout."""


class DeadLettered(TasukiError):
    """A message went to the dead letters with no run of a job to blame (a test's drain
    reports it): an unknown job, an undecodable body, leases that lapsed until its
    attempts were used up."""


class RecordedError(Protocol):
    """An error as a backend keeps it (`tasuki.core.message.ErrorInfo`)."""

    @property
    def type(self) -> str: ...

    @property
    def message(self) -> str: ...

    @property
    def traceback(self) -> str: ...


class JobFailed(TasukiError):
    """The message whose result was asked for was dead-lettered: `error` is its last error
    (as on its `DeadLetter`), `reason` why it died. Re-driving it makes a new result."""

    def __init__(self, queue: str, message_id: str, error: RecordedError, reason: str) -> None:
        what = f"{error.type}: {error.message}" if error.message else error.type
        text = f"message {message_id!r} on queue {queue!r} failed"
        if reason:
            text += f" ({reason})"
        if what:
            text += f": {what}"
        super().__init__(text)
        self.queue, self.message_id, self.error, self.reason = queue, message_id, error, reason

    def __reduce__(self) -> tuple[type[JobFailed], tuple[str, str, RecordedError, str]]:
        return (type(self), (self.queue, self.message_id, self.error, self.reason))


class ResultTimeout(TasukiError, TimeoutError):
    """The result was not there within the timeout: the message is still waiting or
    running. Asking again later may answer."""


class ResultMissing(TasukiError, LookupError):
    """No result will ever come for this id: unknown, its job keeps no result
    (`keep_result=`), or it was kept past its time. Answered at once."""


class UnknownFlow(ResultMissing):
    """`app.flow`, `app.flow_result`, `app.cancel_flow`: no flow has this id (never
    started, or kept past its retention). Answered at once."""


class FlowCancelled(TasukiError):
    """`app.flow_result`: the flow was cancelled (`app.cancel_flow`); it has no result
    and will have none."""
