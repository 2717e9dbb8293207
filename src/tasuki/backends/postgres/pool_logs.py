"""psycopg_pool's repeated warnings about tasuki's own pools, kept out of the log.

While the server is down, psycopg_pool warns once per failed reconnect and once per
connection it discards: a dozen lines a second from every worker. tasuki says the same
thing once when the outage begins and once when it ends (`runtime/outage.py`), so those
warnings are dropped for pools named `tasuki-...`. A user's own pools keep theirs, and
setting the `psycopg.pool` logger to DEBUG brings ours back for a closer look.
"""

from __future__ import annotations

import logging

POOL_LOGGER = "psycopg.pool"
PREFIX = "tasuki-"


class _QuietTasukiPools(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING or not record.args:
            return True
        if logging.getLogger(POOL_LOGGER).isEnabledFor(logging.DEBUG):
            return True
        first = record.args[0] if isinstance(record.args, tuple) else None
        if isinstance(first, str):
            name = first  # "error connecting in %r", "reconnection attempt in pool %r"
        else:
            name = getattr(getattr(first, "_pool", None), "name", "")  # "discarding ... %s"
        return not (isinstance(name, str) and name.startswith(PREFIX))


_FILTER = _QuietTasukiPools()


def quiet() -> None:
    """Install the filter once per process (idempotent: a logger holds a filter once)."""
    logging.getLogger(POOL_LOGGER).addFilter(_FILTER)
