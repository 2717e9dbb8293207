"""Load the Lua scripts kept as files beside a backend, one file per atomic operation.

A script lives at `<package>/lua/<name>.lua`. It may pull in a shared fragment from
`<package>/lua/includes/` with a line `--- @include "name"`: the line is replaced by
the fragment's text (each fragment at most once per script; a fragment may include
others). The Redis backend loads its scripts here, and so do the records SQS keeps in a
Redis lock store (`tasuki.backends.sqs.records`, its `lua/records_*.lua`);
`benchmarks/redis_scripts_ab.py` too, from any tree.

A script that returns records declares each kind's fields in order, by name, with a
line `--- @reply NAME: field field ...` (read by `reply_fields`), so that the code that
reads the reply names the same fields.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from importlib import resources

_INCLUDE = re.compile(r'^--- @include "([a-z_]+)"$', re.MULTILINE)
_REPLY = re.compile(r"^--- @reply ([a-z_]+): ([a-z_ ]+)$", re.MULTILINE)


def expand(read: Callable[..., str], name: str) -> str:
    """The text of script `name` with its includes expanded; `read(*parts)` gives the
    text of a file under a `lua/` folder (`read("x.lua")`, `read("includes", "y.lua")`)."""
    seen: set[str] = set()

    def include(match: re.Match[str]) -> str:
        fragment = match.group(1)
        if fragment in seen:
            return ""
        seen.add(fragment)
        return _INCLUDE.sub(include, read("includes", f"{fragment}.lua"))

    return _INCLUDE.sub(include, read(f"{name}.lua"))


@cache
def lua_source(package: str, name: str) -> str:
    """The text of `<package>/lua/<name>.lua` with its includes expanded."""
    folder = resources.files(package).joinpath("lua")
    return expand(lambda *parts: folder.joinpath(*parts).read_text("utf-8"), name)


def reply_fields(source: str) -> dict[str, tuple[str, ...]]:
    """The records a script's text declares it returns: name -> its fields, in order."""
    return {name: tuple(fields.split()) for name, fields in _REPLY.findall(source)}
