"""Why a message died when no run of it decided: the codes backends store, the words people read.

A backend that finds a message out of attempts at lease time dead-letters it itself, in
its own script or statement, where no Python runs. It stores one of these codes as the
reason; the sentence is made here, once, from the code and the attempt counts every
backend keeps with the message. The worker stores a sentence of its own for the fates it
decides (`core/failure.py`), which `describe` passes through unchanged.
"""

from __future__ import annotations

# Leased again after its last lease expired, with no attempt left: its runs keep dying
# with their worker (a poison message), so it is quarantined instead of looping.
LEASE_EXPIRED = "lease_expired"
# Found waiting with no attempt left (its limit was lowered, or it was released without
# the attempt being given back): dead-lettered before it runs again.
ATTEMPTS_EXHAUSTED = "attempts_exhausted"


def describe(reason: str, attempt: int, max_attempts: int | None) -> str:
    """The sentence for a stored reason: a code rendered, anything else as it is."""
    if reason == LEASE_EXPIRED:
        return f"lease expired {attempt} times"
    if reason == ATTEMPTS_EXHAUSTED:
        return f"attempts exhausted ({attempt} of {max_attempts})"
    return reason


def exhausted(attempt: int, max_attempts: int) -> bool:
    """The attempt limit, the one rule: a message leased `attempt` times may not run again
    once that reaches its limit. Backends apply it at lease time (in their own language)
    with the limit stamped on the message; the worker with its job's own limit."""
    return attempt >= max_attempts
