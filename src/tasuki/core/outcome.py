"""How one run ended, and what will be done with its message."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

# "cancel": the message was cancelled while it ran; nothing is settled (see `Context`).
Action = Literal["ack", "skip", "defer", "retry", "dead", "cancel"]


@dataclass(slots=True)
class Outcome:
    """What happened to one run, and what the worker will do with the message.

    `action` is None while undecided: an error nobody decided on is retried by the
    worker's default policy, so no message is ever left without a fate.
    """

    result: Any = None
    error: BaseException | None = None
    action: Action | None = None
    delay: float = 0.0
    reason: str = ""
    duration: float = 0.0
    # The JSON of `result`, when the job keeps it (`keep_result=`): written with the ack.
    kept: bytes | None = None
    # Told, once the message's settle is over, whether it was acked (the ack landed):
    # what must follow the ack and never run ahead of it (`when_acked`).
    acked_hooks: list[Callable[[bool], None]] | None = None

    def when_acked(self, hook: Callable[[bool], None]) -> None:
        """Call `hook(True)` once this run's ack has landed, `hook(False)` if the message
        ended any other way or its settle never landed (lost lease, failed ack)."""
        if self.acked_hooks is None:
            self.acked_hooks = []
        self.acked_hooks.append(hook)

    def decide(self, action: Action, *, delay: float = 0.0, reason: str = "") -> None:
        self.action, self.delay, self.reason = action, delay, reason
