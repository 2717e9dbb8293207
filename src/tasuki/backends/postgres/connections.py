"""tasuki's psycopg connection pool: fails fast while the server is down, is back within a
second of it, and stays quiet meanwhile.

Four things of psycopg_pool's defaults hurt a job queue when the server goes away (the
fourth, its `check=` sleeping 1, 2, 4 s between idle connections a restart had broken,
is answered where connections are taken, `PostgresDialect._connection`):

- a call waits up to 30 s for a connection while there is none to be had, so an
  `enqueue` in a web request hung for 30 s before it could report the outage. Ours waits
  `POOL_WAIT` (5 s): room for the pool's ordinary contention, then `BackendUnavailable`;

- it reconnects with a doubling backoff from 1 s (1, 3, 7, 15 s after the failure), so a
  worker came back up to as long again as the restart took, and every lease that
  lapsed meanwhile was redelivered that much later (measured in the chaos runs: p99
  redelivery 5 s against a target of the lease + 2 s). Our pool retries after 0.1 s,
  growing by half each time to at most 1 s. The hook is psycopg_pool's private
  `_add_connection`; if a release renames it, the pool falls back to the stock backoff
  (`test_the_pool_fails_fast_in_an_outage_and_is_back_within_a_second` in
  tests/backends/postgresql/test_postgres_faults.py tells);
- it warns once per failed reconnect and once per connection it discards: a dozen lines
  a second from every worker. tasuki says the same once when an outage begins and once
  when it ends (`runtime/outage.py`), so those warnings are dropped for pools named
  `tasuki-...`. A user's own pools keep theirs, and setting the `psycopg.pool` logger to
  DEBUG brings ours back.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool
from psycopg_pool.base import AttemptWithBackoff

POOL_LOGGER = "psycopg.pool"
PREFIX = "tasuki-"
POOL_WAIT = 5.0
FIRST_RETRY = 0.1
LONGEST_RETRY = 1.0


class _Prompt(AttemptWithBackoff):
    INITIAL_DELAY = FIRST_RETRY
    DELAY_BACKOFF = 1.5

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, LONGEST_RETRY)


class Pool(ConnectionPool[psycopg.Connection[Any]]):
    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        super()._add_connection(attempt or _Prompt(timeout=self.reconnect_timeout), growing)


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
