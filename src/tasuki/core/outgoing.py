"""A message on its way in, before the backend sees it: still editable by client middleware."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tasuki.core.job import Job
    from tasuki.core.records import UniqueClaim


@dataclass(slots=True)
class Outgoing:
    """A message being enqueued, still editable by client middleware."""

    queue: str
    id: str
    job: Job[..., Any] | None
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    max_attempts: int = 10
    visibility_timeout: float | None = None
    keep_id: float = 0.0
    unique: UniqueClaim | None = None
    id_given: bool = False
    # 0 (lowest) to 9: the order of the lease (`Envelope.priority`).
    priority: int = 0
