"""The records SQS keeps in its `locks=` store: a lease record per message (fencing, the
leases counted on a copy, cancels and progress), the id window of idempotent enqueue,
result records, and the flows and barriers of workflows (base.py says what each is);
beside them the durable steps (steps.py) and the console's listings of messages in
flight and dead (listing.py).

One module per store, chosen here by the store's URL scheme (`records_for`) and by the
records in use (`steps_in`, `listing_in`): SQLite keeps them in tables of their own in
its database (sqlite.py, sqlite_flows.py, sqlite_steps.py, sqlite_listing.py), Redis as
its own keys, a batch per script call (redis.py, redis_flows.py, redis_steps.py,
redis_listing.py, `lua/`); any other store over its plain locks (plain.py), with no
steps and no listings. Only SQS uses them: the SQLite and Redis backends know nothing
of them, and these modules reach those stores only through their public backend
classes. The store modules import the interfaces (base.py, steps.py, listing.py) and
nothing imports them but this picker, so no two modules import each other.
"""

from __future__ import annotations

import sys

from tasuki.backends.base import Backend
from tasuki.backends.sqs.records.base import FlowRecords, LeaseRecords, RecordLifetimes
from tasuki.backends.sqs.records.listing import Listing
from tasuki.backends.sqs.records.plain import PlainLeaseRecords
from tasuki.backends.sqs.records.steps import StepRecords
from tasuki.backends.urls import scheme_of

__all__ = [
    "FlowRecords",
    "LeaseRecords",
    "Listing",
    "PlainLeaseRecords",
    "RecordLifetimes",
    "StepRecords",
    "listing_in",
    "records_for",
    "steps_in",
]

REDIS_SCHEMES = ("redis", "rediss", "unix")
SQLITE_RECORDS = "tasuki.backends.sqs.records.sqlite"
REDIS_RECORDS = "tasuki.backends.sqs.records.redis"


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


def steps_in(records: LeaseRecords) -> StepRecords | None:
    """The step records kept beside `records` (the lease records of SQS's `locks=`
    store), or None where that store keeps none. A store's module is imported only when
    its records are in use (`records_for` imported it)."""
    sqlite = sys.modules.get(SQLITE_RECORDS)
    if sqlite is not None and isinstance(records, sqlite.SQLiteLeaseRecords):
        from tasuki.backends.sqs.records.sqlite_steps import SQLiteStepRecords

        return SQLiteStepRecords(records)
    redis = sys.modules.get(REDIS_RECORDS)
    if redis is not None and isinstance(records, redis.RedisLeaseRecords):
        from tasuki.backends.sqs.records.redis_steps import RedisDurableRecords

        return RedisDurableRecords(records)
    return None


def listing_in(records: LeaseRecords) -> Listing | None:
    """The console's listings of messages in flight and dead, kept beside `records`, or
    None where that store keeps none (plain locks: nothing lists them)."""
    sqlite = sys.modules.get(SQLITE_RECORDS)
    if sqlite is not None and isinstance(records, sqlite.SQLiteLeaseRecords):
        from tasuki.backends.sqs.records.sqlite_listing import SQLiteListing

        return SQLiteListing(records)
    redis = sys.modules.get(REDIS_RECORDS)
    if redis is not None and isinstance(records, redis.RedisLeaseRecords):
        from tasuki.backends.sqs.records.redis_listing import RedisListing

        return RedisListing(records)
    return None
