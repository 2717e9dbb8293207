"""One slot of a `tasuki worker --workers N` group (`runtime/supervisor.py`): the child
process in it now and how its starts went, as the supervisor and the group's endpoints
(`runtime/group_endpoints.py`) both read it."""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass

RESTART_FIRST = 0.5  # the first pause before a child is started again; it doubles from here

# A child and its process as one read under the supervisor's lock saw them.
Entry = tuple["Child", "subprocess.Popen[bytes] | None"]


@dataclass
class Child:
    """One slot of the group: the process in it now, and how its starts went."""

    index: int
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    failed_starts: int = 0  # in a row
    pause: float = RESTART_FIRST
    restart_at: float | None = None
    last_exit: str = ""
    restarts: int = 0


def describe_exit(returncode: int) -> str:
    """`status 1` or `signal SIGKILL`, as `Popen.returncode` tells it."""
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"status {returncode}"
