"""The Lua scripts, one file per atomic operation under `lua/`, read once per process.

A script may pull in a shared fragment from `lua/includes/` with a line
`--- @include "name"` (expanded by `tasuki.backends.luafiles`). A script is called by
its SHA1 (EVALSHA) and loaded again on NOSCRIPT, e.g. after a Redis restart; Redis
names a script by the SHA1 of its exact bytes, so the digest here is the one the
server computes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from tasuki.backends.luafiles import lua_source

NAMES = (
    "enqueue",
    "lease",
    "settle",
    "keep",
    "cancel",
    "result",
    "stats",
    "dead_letters",
    "dead_letter",
    "inspect",
    "in_flight",
    "redrive",
    "purge_dead",
    "purge",
    "lock_acquire",
    "lock_renew",
    "lock_release",
    "lock_swap",
    "lock_holder",
    "add_meters",
    "start_flow",
    "cancel_flow",
    "steps",
    "record_step",
    "take_signal",
    "send_signal",
    "waiting",
    "browse",
    "retry_many",
    "cancel_many",
    "announce",
    "workers",
    "add_tallies",
    "job_stats",
)


def source(name: str) -> str:
    """The text of `lua/<name>.lua` with its includes expanded."""
    return lua_source("tasuki.backends.redis", name)


@dataclass(frozen=True, slots=True)
class Script:
    """A script as Redis knows it: `sha` is the SHA1 of `source`, in hex."""

    name: str
    source: str
    sha: str


def load(package: str, name: str) -> Script:
    """Script `name` of `<package>/lua/`, as Redis knows it: how the scripts of another
    package (the records SQS keeps in a Redis lock store) are called on this backend's
    connection (`Connection.run` takes a `Script` as well as a name)."""
    text = lua_source(package, name)
    return Script(name, text, hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest())


class Scripts:
    """Every script by name, each read from its file on first use."""

    enqueue: Script
    lease: Script
    settle: Script
    extend: Script
    keep: Script
    cancel: Script
    result: Script
    stats: Script
    dead_letters: Script
    dead_letter: Script
    inspect: Script
    in_flight: Script
    redrive: Script
    purge_dead: Script
    purge: Script
    lock_acquire: Script
    lock_renew: Script
    lock_release: Script
    lock_swap: Script
    lock_holder: Script
    add_meters: Script
    start_flow: Script
    cancel_flow: Script
    steps: Script
    record_step: Script
    take_signal: Script
    send_signal: Script
    waiting: Script
    browse: Script
    retry_many: Script
    cancel_many: Script
    announce: Script
    workers: Script
    add_tallies: Script
    job_stats: Script

    def __getattr__(self, name: str) -> Script:
        """Read on first use: a producer that only enqueues reads one file, not all."""
        if name not in NAMES:
            raise AttributeError(name)
        script = load("tasuki.backends.redis", name)
        setattr(self, name, script)
        return script


# The scripts are the same for every server, so the process reads each file once.
SCRIPTS = Scripts()
