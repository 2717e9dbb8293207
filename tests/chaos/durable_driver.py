"""What the runner does for durable jobs: sends their signals and keeps the table their
transactional step writes into, in the backend's own database.

A signal goes out right after its message was enqueued (early: kept for the wait to
come) or a few seconds later (late: the message is waiting for it, holding nothing, and
the signal makes it ready). Each is retried while the store is unavailable (a fault at
work; a signal that went through before its answer was lost is a second signal of the
name, which the job's one wait leaves alone).
"""

from __future__ import annotations

import heapq
import sqlite3
import threading
import time

import psycopg

import tasuki
from tasuki.errors import BackendUnavailable
from tests.chaos.backends import PostgresService, Service, SQLiteService, SqsService
from tests.chaos.durable import EFFECTS, payload


class Signaller(threading.Thread):
    """Sends `go` to each message given it, when its time comes."""

    def __init__(self, app: tasuki.App) -> None:
        super().__init__(name="chaos-signaller", daemon=True)
        self.app = app
        self._due: list[tuple[float, int]] = []
        self._cv = threading.Condition()
        self._closed = False
        self.sent = (0, 0)  # early, late
        self.unknown: list[int] = []  # messages the backend did not know when signalled
        self.errors = 0
        self.failure: BaseException | None = None

    def send_now(self, n: int) -> None:
        """Early: from the producer's thread, before its message can have waited."""
        self._send(n)
        self.sent = (self.sent[0] + 1, self.sent[1])

    def later(self, n: int, delay: float) -> None:
        with self._cv:
            heapq.heappush(self._due, (time.monotonic() + delay, n))
            self._cv.notify()

    def close(self) -> None:
        """No more messages: send what is due, then end."""
        with self._cv:
            self._closed = True
            self._cv.notify()

    def run(self) -> None:
        try:
            while True:
                with self._cv:
                    while not self._due and not self._closed:
                        self._cv.wait()
                    if not self._due:
                        return
                    at, n = self._due[0]
                    wait = at - time.monotonic()
                    if wait > 0:
                        self._cv.wait(wait)
                        continue
                    heapq.heappop(self._due)
                self._send(n)
                self.sent = (self.sent[0], self.sent[1] + 1)
        except BaseException as exc:
            self.failure = exc
            raise

    def _send(self, n: int) -> None:
        while True:
            try:
                answer = self.app.signal("default", f"m-{n}", "go", payload(n))
                break
            except BackendUnavailable:
                self.errors += 1
                time.sleep(0.1)
        if answer != "delivered":
            self.unknown.append(n)


def prepare_effects(service: Service) -> bool:
    """Make the transactional step's table where the backend's database is one this
    runner knows how to reach; False where it is not (no transactional step then)."""
    if isinstance(service, SQLiteService) and service.path is not None:
        with sqlite3.connect(service.path) as conn:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {EFFECTS} (n integer, run text)")
        conn.close()
        return True
    if isinstance(service, PostgresService):
        with psycopg.connect(_dsn(service), autocommit=True) as pg:
            pg.execute(f'CREATE SCHEMA IF NOT EXISTS "{service.schema}"')
            pg.execute(f'CREATE TABLE "{service.schema}".{EFFECTS} (n integer, run text)')
        return True
    return False


def effects(service: Service) -> dict[int, int]:
    """The transactional step's rows per message number."""
    query = f"SELECT n, count(*) FROM {EFFECTS} GROUP BY n"
    if isinstance(service, SQLiteService) and service.path is not None:
        conn = sqlite3.connect(service.path)
        try:
            return {int(n): int(c) for n, c in conn.execute(query)}
        finally:
            conn.close()
    if isinstance(service, PostgresService):
        with psycopg.connect(_dsn(service)) as pg:
            pg.execute(f'SET search_path TO "{service.schema}"')
            return {int(n): int(c) for n, c in pg.execute(query)}
    return {}


def _dsn(service: PostgresService) -> str:
    return service.url.split("?", 1)[0]


def stale_copies(service: Service) -> int:
    """How many copies the backend left in its queues on purpose, to be deleted unrun
    when met: on SQS, the delayed copy of each wait a signal answered (SQS cannot make
    a delayed copy visible early, so the signal sent a new one), which sleeps until the
    wait's time or a hop of `max_delay` (15 minutes). The lock store keeps each such
    wait as `resent` (an upper bound once some were met). 0 elsewhere."""
    if not isinstance(service, SqsService) or not service.locks.exists():
        return 0
    conn = sqlite3.connect(service.locks)
    try:
        row = conn.execute("SELECT count(*) FROM tasuki_sqs_waits WHERE state = 'resent'")
        return int(row.fetchone()[0])
    except sqlite3.OperationalError:  # no durable call was ever made: no such table
        return 0
    finally:
        conn.close()
