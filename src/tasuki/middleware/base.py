"""The middleware protocol and the ordered chain that holds it.

A middleware wraps two calls:

* `enqueue(messages, call_next)` on the producer side, Rack style: it may change the
  drafts, call `call_next` (or not) and look at what the backend answered. It works on a
  batch because `enqueue_many` is one round trip.
* `execute(ctx)` on the worker side, for the jobs `applies_to(job)` accepts, as a
  generator: code before `yield` runs before the job, `yield` hands back the `Outcome`,
  code after it may inspect or change it. The same chain thus serves thread, asyncio and
  process jobs alike. Raising `Skip` or `Defer` before the `yield` stops the job from
  running; raising anything else fails it. An `execute` that is a plain function (it
  returns None) runs before the job only.
* `lease_extended(ctx, lag)` and `lease_lost(ctx)`: what the lease keeper did for a
  running delivery (an extension, `lag` seconds after it was due; an extension the
  backend refused), called from the keeper's thread, for metrics.
* `after(ctx, outcome)`, the cheap form of "code after the `yield`" for middleware that
  only looks at how a run ended: a plain call at the same place in the chain, where a
  generator costs an object and two resumptions per message. It runs for every message
  whose run got past this middleware on the way in.

A middleware names the job options it owns in `options`, so `@app.job(my_option=...)` is
accepted only when some installed middleware will act on it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from tasuki.core.outcome import Action, Outcome
from tasuki.core.outgoing import Outgoing

if TYPE_CHECKING:
    from tasuki.core.context import Context
    from tasuki.core.job import Job
    from tasuki.core.records import Enqueued

__all__ = [
    "Action",
    "EnqueueNext",
    "ExecuteHook",
    "Middleware",
    "MiddlewareChain",
    "Outcome",
    "Outgoing",
    "build_enqueue",
]


EnqueueNext = Callable[[list[Outgoing]], "list[Enqueued]"]
ExecuteHook = Generator[None, Outcome, None]


class Middleware:
    """Base class: override `enqueue`, `execute`, or both."""

    options: ClassVar[frozenset[str]] = frozenset()

    def enqueue(self, messages: list[Outgoing], call_next: EnqueueNext) -> list[Enqueued]:
        return call_next(messages)

    def execute(self, ctx: Context) -> ExecuteHook | None:
        return None

    def after(self, ctx: Context, outcome: Outcome) -> None:
        """Look at, or change, the outcome on the way out (see the module docstring)."""

    def lease_extended(self, ctx: Context, lag: float) -> None:
        """The lease keeper extended this delivery's lease, `lag` seconds after it was due."""

    def lease_lost(self, ctx: Context) -> None:
        """The backend refused to extend this delivery's lease: another one owns it now."""

    def applies_to(self, job: Job[..., Any]) -> bool:
        """Whether `execute` can do anything for this job's messages.

        The worker asks once per job and chain version, and leaves the middleware out of
        the runs of jobs it says no for: a guard for an option the job does not use
        then costs nothing per message. The default is yes.
        """
        return True

    def overrides(self, method: str) -> bool:
        return getattr(type(self), method) is not getattr(Middleware, method)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


Selector = type[Middleware] | str | Middleware


class MiddlewareChain:
    """An ordered list of middleware, outermost first."""

    def __init__(self, items: list[Middleware] | None = None) -> None:
        self._items: list[Middleware] = list(items or [])
        self.version = 0

    def __iter__(self) -> Iterator[Middleware]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, selector: object) -> bool:
        return any(_matches(m, selector) for m in self._items)

    def _index(self, selector: Selector) -> int:
        for i, m in enumerate(self._items):
            if _matches(m, selector):
                return i
        raise LookupError(f"no middleware matching {selector!r} in {self._items!r}")

    def get(self, selector: Selector) -> Middleware:
        return self._items[self._index(selector)]

    def append(self, middleware: Middleware) -> None:
        self._items.append(middleware)
        self.version += 1

    def insert_before(self, selector: Selector, middleware: Middleware) -> None:
        self._items.insert(self._index(selector), middleware)
        self.version += 1

    def insert_after(self, selector: Selector, middleware: Middleware) -> None:
        self._items.insert(self._index(selector) + 1, middleware)
        self.version += 1

    def remove(self, selector: Selector) -> Middleware:
        removed = self._items.pop(self._index(selector))
        self.version += 1
        return removed

    def owned_options(self) -> frozenset[str]:
        owned: set[str] = set()
        for m in self._items:
            owned |= m.options
        return frozenset(owned)

    def __repr__(self) -> str:
        return f"MiddlewareChain({self._items!r})"


def _matches(m: Middleware, selector: object) -> bool:
    if isinstance(selector, str):
        return type(m).__name__ == selector
    if isinstance(selector, type):
        return isinstance(m, selector)
    return m is selector


def build_enqueue(chain: MiddlewareChain, store: EnqueueNext) -> EnqueueNext:
    """Compose the client side of the chain around `store`, outermost first."""
    call = store
    for m in reversed([m for m in chain if m.overrides("enqueue")]):
        call = _bind(m, call)
    return call


def _bind(m: Middleware, call_next: EnqueueNext) -> EnqueueNext:
    def call(messages: list[Outgoing]) -> list[Enqueued]:
        return m.enqueue(messages, call_next)

    return call
