"""A new SQLite database file is private to its owner: mode 0600, whatever the umask.

The file holds every message body, error and traceback, and anyone who can write it
can enqueue, ack or purge anything; a default umask of 022 would leave it readable by
every user of the machine. SQLite creates the `-wal` and `-shm` files beside it with
the database file's own mode, so making the database file 0600 before SQLite first
opens it makes all three private. A file that already exists keeps the mode its owner
gave it.
"""

from __future__ import annotations

import contextlib
import os

PRIVATE = 0o600


def create_private(path: str) -> None:
    """Create `path`, empty, with mode 0600 if it does not exist (an empty file is an
    empty SQLite database). Any failure is left for SQLite's own open to report."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE)
    except OSError:  # it exists (kept as it is), or the directory does not: SQLite says
        return
    try:
        os.fchmod(fd, PRIVATE)  # the umask may have taken bits off
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
