"""Script calls a Redis server has run, counted by the server itself (INFO commandstats)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def script_calls(command: Callable[..., Any]) -> int:
    """EVAL and EVALSHA calls so far, asked with `command` (a backend's `_command`)."""
    text = command("INFO", "commandstats").decode()
    total = 0
    for line in text.splitlines():
        if line.startswith(("cmdstat_eval:", "cmdstat_evalsha:")):
            total += int(line.split("calls=", 1)[1].split(",", 1)[0])
    return total
