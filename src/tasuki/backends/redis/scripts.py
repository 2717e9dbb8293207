"""The Lua scripts, one file per atomic operation under `lua/`, loaded once per client.

A script may pull in a shared fragment from `lua/includes/` with a line
`--- @include "name"`: the line is replaced by the fragment's text (each fragment at
most once per script). Scripts are registered with redis-py, which calls them by SHA
(EVALSHA) and loads them again on NOSCRIPT, e.g. after a Redis restart.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from redis.commands.core import Script

_INCLUDE = re.compile(r'^--- @include "([a-z_]+)"$', re.MULTILINE)

NAMES = (
    "enqueue",
    "lease",
    "ack",
    "extend",
    "release",
    "bury",
    "stats",
    "dead_letters",
    "dead_letter",
    "redrive",
    "purge_dead",
    "purge",
    "lock_acquire",
    "lock_renew",
    "lock_release",
    "lock_swap",
    "lock_holder",
)


def _read(*parts: str) -> str:
    return resources.files("tasuki.backends.redis").joinpath("lua", *parts).read_text("utf-8")


@cache
def source(name: str) -> str:
    """The text of `lua/<name>.lua` with its includes expanded."""
    seen: set[str] = set()

    def expand(match: re.Match[str]) -> str:
        fragment = match.group(1)
        if fragment in seen:
            return ""
        seen.add(fragment)
        return _INCLUDE.sub(expand, _read("includes", f"{fragment}.lua"))

    return _INCLUDE.sub(expand, _read(f"{name}.lua"))


class Scripts:
    """The scripts, registered with one client (a `Redis` or a `RedisCluster`)."""

    enqueue: Script
    lease: Script
    ack: Script
    extend: Script
    release: Script
    bury: Script
    stats: Script
    dead_letters: Script
    dead_letter: Script
    redrive: Script
    purge_dead: Script
    purge: Script
    lock_acquire: Script
    lock_renew: Script
    lock_release: Script
    lock_swap: Script
    lock_holder: Script

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Script:
        """Registered on first use: a producer that only enqueues reads one file, not 17."""
        if name not in NAMES:
            raise AttributeError(name)
        script: Script = self._client.register_script(source(name))
        setattr(self, name, script)
        return script
