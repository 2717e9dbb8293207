"""The SQLite backend's lock store: the SQL layer's locks, and lease records in a table
of their own (`lease_records.py`) rather than as plain locks."""

from __future__ import annotations

from tasuki.backends.sql.dialect import Dialect
from tasuki.backends.sql.locks import SQLLockStore
from tasuki.backends.sqlite.lease_records import SQLiteLeaseRecords
from tasuki.core.locks import RecordLifetimes


class SQLiteLockStore(SQLLockStore):
    def __init__(self, dialect: Dialect, path: str) -> None:
        super().__init__(dialect)
        self._path = path

    def lease_records(self, namespace: str, lifetimes: RecordLifetimes) -> SQLiteLeaseRecords:
        """A batch per transaction, with the counts kept per record."""
        return SQLiteLeaseRecords(self._path, namespace, lifetimes)
