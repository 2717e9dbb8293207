"""The records SQS keeps in its `locks=` store: a lease record per message (fencing, the
leases counted on a copy, cancels and progress), the id window of idempotent enqueue,
result records, and the flows and barriers of workflows (base.py says what each is).

One module per store, chosen by the store's URL scheme (`records_for`): SQLite keeps
them in tables of their own in its database (sqlite.py, sqlite_flows.py), Redis as its
own keys, a batch per script call (redis.py, redis_flows.py, `lua/`); any other store
over its plain locks (plain.py). Only SQS uses them: the SQLite and Redis backends know
nothing of them, and these modules reach those stores only through their public
backend classes.
"""

from __future__ import annotations

from tasuki.backends.base import Backend
from tasuki.backends.sqs.records.base import FlowRecords, LeaseRecords, RecordLifetimes
from tasuki.backends.sqs.records.plain import PlainLeaseRecords
from tasuki.backends.urls import scheme_of

__all__ = ["FlowRecords", "LeaseRecords", "PlainLeaseRecords", "RecordLifetimes", "records_for"]

REDIS_SCHEMES = ("redis", "rediss", "unix")


def records_for(store: Backend, namespace: str, lifetimes: RecordLifetimes) -> LeaseRecords:
    """The records under `namespace` in the backend `store` (SQS's `locks=`): the best
    that store can keep (a batch per call, counts kept per record), else plain locks.
    The store's module is imported only when its scheme is used."""
    scheme = scheme_of(store.url)
    if scheme == "sqlite":
        from tasuki.backends.sqs.records import sqlite

        return sqlite.records_in(store, namespace, lifetimes)
    if scheme in REDIS_SCHEMES:
        from tasuki.backends.sqs.records import redis_flows

        return redis_flows.records_in(store, namespace, lifetimes)
    return PlainLeaseRecords(store.locks, namespace, lifetimes)
