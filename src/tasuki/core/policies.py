"""Policy values a job is declared with: how it retries, how it is deduplicated, how it is unique.

They are frozen dataclasses validated at construction, so a wrong setting fails when the
module is imported, not at 3 a.m. when the first failure happens.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, get_args

from tasuki.errors import InvalidArgument

if TYPE_CHECKING:
    from tasuki.core.message import Message

DEFAULT_MAX_ATTEMPTS = 10
# Stamped on a message by a producer that does not know its job's policy (the CLI with
# `--url`, `app.send` to a queue whose consumer this app lacks). The worker enforces the
# job's own limit, lower or higher, so this only bounds a message no worker ever settles
# (below the 1,000 receives after which an SQS queue's own redrive policy moves it).
UNSTATED_MAX_ATTEMPTS = 999


class Backoff(Protocol):
    """Seconds to wait before the next attempt, given the attempt that just failed (1-based)."""

    def __call__(self, attempt: int) -> float: ...


@dataclass(frozen=True, slots=True)
class Exponential:
    """`base * factor**(attempt-1)`, capped; with jitter the delay is drawn from [d/2, d].

    Jitter keeps a burst of failures (a database restart) from retrying in lockstep.
    """

    base: float = 1.0
    cap: float = 300.0
    factor: float = 2.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.base < 0 or self.cap < 0 or self.factor < 1:
            raise InvalidArgument(
                f"exponential backoff needs base >= 0, cap >= 0, factor >= 1; got {self!r}"
            )

    def __call__(self, attempt: int) -> float:
        exponent = max(0, attempt - 1)
        delay = self.cap if exponent > 64 else min(self.cap, self.base * self.factor**exponent)
        if self.jitter:
            delay = random.uniform(delay / 2, delay)
        return delay


@dataclass(frozen=True, slots=True)
class Constant:
    delay: float = 0.0

    def __post_init__(self) -> None:
        if self.delay < 0:
            raise InvalidArgument(f"constant backoff delay must be >= 0, got {self.delay!r}")

    def __call__(self, attempt: int) -> float:
        return self.delay


def exponential(
    base: float = 1.0, cap: float = 300.0, factor: float = 2.0, jitter: bool = True
) -> Exponential:
    return Exponential(base=base, cap=cap, factor=factor, jitter=jitter)


def constant(delay: float) -> Constant:
    return Constant(delay)


ExceptionTypes = tuple[type[BaseException], ...]


@dataclass(frozen=True, slots=True)
class Retry:
    """When a failed attempt is tried again, and after how long.

    `max_attempts` counts every delivery, whatever ended it (exception, timeout, crash),
    so `max_attempts=1` means the job never runs twice, even after a crash.
    An error matching `give_up_on` is final at once; otherwise only errors matching `on`
    are retried.
    """

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: Backoff = field(default_factory=Exponential)
    on: ExceptionTypes = (Exception,)
    give_up_on: ExceptionTypes = ()

    def __post_init__(self) -> None:
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise InvalidArgument(f"max_attempts must be an int >= 1, got {self.max_attempts!r}")
        if not callable(self.backoff):
            raise InvalidArgument(f"backoff must be callable, got {self.backoff!r}")
        for name in ("on", "give_up_on"):
            value = getattr(self, name)
            if isinstance(value, type):
                object.__setattr__(self, name, (value,))
            elif not all(isinstance(t, type) and issubclass(t, BaseException) for t in value):
                raise InvalidArgument(f"Retry.{name} must be exception types, got {value!r}")

    def retries(self, error: BaseException) -> bool:
        """Whether this error is worth another attempt (attempts left aside)."""
        if self.give_up_on and isinstance(error, self.give_up_on):
            return False
        return isinstance(error, self.on)

    def delay(self, attempt: int) -> float:
        return max(0.0, float(self.backoff(attempt)))


KeyFunc = Callable[["Message"], str]


@dataclass(frozen=True, slots=True)
class Dedup:
    """Skip a delivery whose key already succeeded within `window` seconds.

    The default key is the message id, which catches redeliveries and producer retries;
    a user key (bucket + object) catches different messages about the same thing.
    """

    key: KeyFunc | None = None
    window: float = 86400.0

    def __post_init__(self) -> None:
        if self.window <= 0:
            raise InvalidArgument(f"Dedup window must be > 0 seconds, got {self.window!r}")
        if self.key is not None and not callable(self.key):
            raise InvalidArgument("Dedup key must be a callable taking the Message")


UniqueMode = Literal[
    "until_executing",
    "while_executing",
    "until_and_while_executing",
    "until_executed",
    "until_expired",
]
OnConflict = Literal["drop", "raise", "reschedule", "replace"]
UNIQUE_MODES: tuple[str, ...] = get_args(UniqueMode)
ON_CONFLICT: tuple[str, ...] = get_args(OnConflict)


@dataclass(frozen=True, slots=True)
class Unique:
    """At most one copy of a job (by key) in the states the mode names.

    The default key is the job name with its arguments. `ttl` bounds every lock, so a
    crashed worker or a lost message never keeps a key locked forever.
    """

    mode: UniqueMode = "until_executed"
    key: KeyFunc | None = None
    ttl: float | None = None
    on_conflict: OnConflict = "drop"
    reschedule_delay: float = 1.0

    def __post_init__(self) -> None:
        if self.mode not in UNIQUE_MODES:
            raise InvalidArgument(f"Unique mode must be one of {UNIQUE_MODES}, got {self.mode!r}")
        if self.on_conflict not in ON_CONFLICT:
            raise InvalidArgument(
                f"Unique on_conflict must be one of {ON_CONFLICT}, got {self.on_conflict!r}"
            )
        if self.ttl is not None and self.ttl <= 0:
            raise InvalidArgument(f"Unique ttl must be > 0 seconds, got {self.ttl!r}")
        if self.reschedule_delay < 0:
            raise InvalidArgument("Unique reschedule_delay must be >= 0")
        if self.key is not None and not callable(self.key):
            raise InvalidArgument("Unique key must be a callable taking the Message")


MAX_PRIORITY = 9
# A limit's name and what its key callable returns end up in the backend's keys.
MAX_LIMIT_KEY = 256


def check_priority(priority: object) -> int:
    """A message priority: an int from 0 (the default, lowest) to 9 (highest)."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidArgument(f"priority must be an int from 0 to 9, got {priority!r}")
    if not 0 <= priority <= MAX_PRIORITY:
        raise InvalidArgument(f"priority must be from 0 to 9, got {priority}")
    return priority


def _check_limit(kind: str, limit: int, key: KeyFunc | None, name: str | None) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"{kind} needs an int n >= 1, got {limit!r}")
    if key is not None and not callable(key):
        raise InvalidArgument(f"{kind} key must be a callable taking the Message, got {key!r}")
    if name is not None and (not isinstance(name, str) or not name or len(name) > MAX_LIMIT_KEY):
        raise InvalidArgument(
            f"{kind} name must be a non-empty str of at most {MAX_LIMIT_KEY} chars, got {name!r}"
        )


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most `n` starts in any window of `per` seconds, per key, across every worker.

    `key` (a callable taking the `Message`) splits the limit: one per customer, say. The
    limit belongs to the job (keys of two jobs never meet) unless both give the same
    `name`: then they share it, as two jobs calling one external API share its quota.
    A message over the limit is not run and costs no attempt: the backend keeps it
    until its token is due.
    """

    n: int
    per: float = 1.0
    key: KeyFunc | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        _check_limit("RateLimit", self.n, self.key, self.name)
        per = self.per
        if isinstance(per, bool) or not isinstance(per, int | float) or not 0 < per < 1e9:
            raise InvalidArgument(f"RateLimit per must be a number of seconds > 0, got {per!r}")
        object.__setattr__(self, "per", float(per))


@dataclass(frozen=True, slots=True)
class ConcurrencyLimit:
    """At most `n` messages running at once per key, across every worker.

    A slot is the lease that holds it: freed by the ack, the dead letter, the release, a
    cancel, or the lease's expiry when its worker died. `key` and `name` as in
    `RateLimit`.
    """

    n: int
    key: KeyFunc | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        _check_limit("ConcurrencyLimit", self.n, self.key, self.name)
