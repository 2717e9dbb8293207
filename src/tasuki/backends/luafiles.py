"""Load the Lua scripts kept as files beside a backend, one file per atomic operation.

A script lives at `<package>/lua/<name>.lua`. It may pull in a shared fragment from
`<package>/lua/includes/` with a line `--- @include "name"`: the line is replaced by
the fragment's text (each fragment at most once per script; a fragment may include
others). The Redis backend and the SQS backend's Redis lock records both load theirs
here.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_INCLUDE = re.compile(r'^--- @include "([a-z_]+)"$', re.MULTILINE)


def _read(package: str, *parts: str) -> str:
    return resources.files(package).joinpath("lua", *parts).read_text("utf-8")


@cache
def lua_source(package: str, name: str) -> str:
    """The text of `<package>/lua/<name>.lua` with its includes expanded."""
    seen: set[str] = set()

    def expand(match: re.Match[str]) -> str:
        fragment = match.group(1)
        if fragment in seen:
            return ""
        seen.add(fragment)
        return _INCLUDE.sub(expand, _read(package, "includes", f"{fragment}.lua"))

    return _INCLUDE.sub(expand, _read(package, f"{name}.lua"))
