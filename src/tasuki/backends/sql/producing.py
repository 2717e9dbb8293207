"""Enqueue on the SQL backends, and how an `Envelope` becomes a row's parameters.

Messages without a unique claim whose ids all differ ("plain": each one's fate is its
own) go in as a batch: in one statement where the dialect's file has `insert_batch`
(PostgreSQL, in autocommit: one round trip that also wakes the listeners), else in two
steps' worth of statements, which ids are known, then the inserts of the others. A
message with a unique claim takes its lock first, in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from tasuki.backends.base import Enqueued, Envelope
from tasuki.backends.sql import results as kept_results
from tasuki.backends.sql.dialect import Connection, Dialect, Queries, named_rows
from tasuki.backends.sql.limits import limits_json
from tasuki.backends.sql.steps import Depth

_EMPTY_HEADERS_JSON = "{}"


def enqueue(
    dialect: Dialect,
    envelopes: Sequence[Envelope],
    clock: Callable[[], float],
    connection: object | None,
    aging: float,
) -> list[Enqueued]:
    """`now` is read once the connection is ours (the first one may have waited for
    the migrations): a delay counts from the write, not from the call. `aging` (the
    backend's `priority_aging`) gives each message its head start, priority x aging,
    fixed at enqueue: a changed aging applies to messages enqueued after the change."""
    if connection is not None:
        # The caller's transaction: written now, visible (and announced) on its commit.
        conn, queries = dialect.joined(connection)
        return enqueue_in(dialect, conn, queries, envelopes, clock(), aging)
    if not envelopes:
        return []
    q = dialect.queries
    # The whole write in one statement, unless a result record must be written with it.
    if "insert_batch" in q and plain(envelopes) and not keeps_results(envelopes):
        with dialect.statements() as conn:
            return insert_batch(dialect, conn, q, envelopes, clock(), aging, outside=True)
    with dialect.write() as conn:
        results = enqueue_in(dialect, conn, q, envelopes, clock(), aging)
    dialect.committed()
    return results


def enqueue_in(
    dialect: Dialect,
    conn: Connection,
    q: Queries,
    envelopes: Sequence[Envelope],
    now: float,
    aging: float,
) -> list[Enqueued]:
    """Enqueue inside a transaction that is already open on `conn`."""
    if not envelopes:
        return []
    if plain(envelopes) and "insert_batch" in q:  # it announces what it stored itself
        stored = insert_batch(dialect, conn, q, envelopes, now, aging, outside=False)
        kept_results.pending(conn, dialect, envelopes, stored)
        return stored
    if plain(envelopes):
        results = _insert_plain(dialect, conn, q, envelopes, now, aging)
    else:
        results = [_enqueue_one(conn, q, env, now, aging) for env in envelopes]
    kept_results.pending(conn, dialect, envelopes, results)
    _count_enqueued(conn, dialect, envelopes, results)
    queues = {
        env.queue
        for env, result in zip(envelopes, results, strict=True)
        if result.status != "duplicate"
    }
    if queues:
        dialect.changed(conn, sorted(queues))
    return results


def _count_enqueued(
    conn: Connection, dialect: Dialect, envelopes: Sequence[Envelope], results: list[Enqueued]
) -> None:
    depth = Depth()
    for env, result in zip(envelopes, results, strict=True):
        if result.status == "enqueued":
            depth.add(env.queue, waiting=1)
    depth.write(conn, dialect)


def keeps_results(envelopes: Sequence[Envelope]) -> bool:
    return any(env.keep_result > 0 for env in envelopes)


def plain(envelopes: Sequence[Envelope]) -> bool:
    """No unique claims and no id twice: each message's fate is its own."""
    if any(env.unique is not None for env in envelopes):
        return False
    return len({(env.queue, env.id) for env in envelopes}) == len(envelopes)


def insert_batch(
    dialect: Dialect,
    conn: Connection,
    q: Queries,
    envelopes: Sequence[Envelope],
    now: float,
    aging: float,
    *,
    outside: bool,
) -> list[Enqueued]:
    """Plain messages in one `insert_batch` statement. `outside` a transaction, a batch
    whose ids are all of our own making (no id window) first tries `insert_batch_new`,
    which fails as a whole, changing nothing, if one of them is stored already."""
    params = {**_batch_params(dialect, envelopes, now, aging), **dialect.announce}
    if outside and "insert_batch_new" in q and all(e.keep_id == 0 for e in envelopes):
        try:
            return _stored(envelopes, conn, q["insert_batch_new"], params)
        except dialect.duplicate_key:
            pass  # nothing was written: ask the statement that tells duplicates apart
    return _stored(envelopes, conn, q["insert_batch"], params)


def _stored(
    envelopes: Sequence[Envelope], conn: Connection, sql: str, params: dict[str, Any]
) -> list[Enqueued]:
    stored = set(named_rows(conn.execute(sql, params), "queue", "id"))
    return [
        Enqueued(e.id, "enqueued" if (e.queue, e.id) in stored else "duplicate") for e in envelopes
    ]


def _insert_plain(
    dialect: Dialect,
    conn: Connection,
    q: Queries,
    envelopes: Sequence[Envelope],
    now: float,
    aging: float,
) -> list[Enqueued]:
    """Which ids are known, then the inserts of the others (`Dialect.many` pipelines each
    step where the engine can)."""
    many = dialect.many
    known = many(
        conn,
        q["known_id"],
        [{"queue": e.queue, "id": e.id, "now": now} for e in envelopes],
        ("known",),
    )
    fresh = [env for env, (_, rows) in zip(envelopes, known, strict=True) if not rows]
    inserted = many(conn, q["insert_message"], [insert_params(env, now, aging) for env in fresh])
    stored = {env.id for env, (count, _) in zip(fresh, inserted, strict=True) if count}
    return [Enqueued(env.id, "enqueued" if env.id in stored else "duplicate") for env in envelopes]


def _enqueue_one(conn: Connection, q: Queries, env: Envelope, now: float, aging: float) -> Enqueued:
    if conn.execute(q["known_id"], {"queue": env.queue, "id": env.id, "now": now}).fetchone():
        return Enqueued(env.id, "duplicate")
    headers = headers_json(env.headers)
    unique_key = None
    if env.unique is not None:
        unique_key = env.unique.key
        holder = _unique_holder(conn, q, env, now)
        if holder is not None:
            if env.unique.replace:
                replaced = conn.execute(
                    q["replace_waiting_payload"],
                    {"queue": env.queue, "id": holder, "body": env.body, "headers": headers},
                ).rowcount
                if replaced:
                    return Enqueued(holder, "replaced")
            return Enqueued(holder, "conflict")
    params = insert_params(env, now, aging, headers, unique_key)
    inserted = conn.execute(q["insert_message"], params)
    # 0 only where the engine lets a concurrent enqueue of the same id win the race
    # (PostgreSQL: ON CONFLICT DO NOTHING); SQLite's writes are serialized.
    return Enqueued(env.id, "enqueued" if inserted.rowcount else "duplicate")


def _unique_holder(conn: Connection, q: Queries, env: Envelope, now: float) -> str | None:
    """Take the unique claim for `env`, or return the id of the live holder."""
    assert env.unique is not None
    key = env.unique.key
    holder = _holder(conn, q, key, now)
    if holder is not None and holder != env.id:
        return holder
    taken = conn.execute(
        q["lock_acquire"], {"key": key, "owner": env.id, "ttl": env.unique.ttl, "now": now}
    ).rowcount
    if taken:
        return None
    # A concurrent enqueue took the claim between the two statements.
    holder = _holder(conn, q, key, now)
    return None if holder is None or holder == env.id else holder


def _holder(conn: Connection, q: Queries, key: str, now: float) -> str | None:
    rows = named_rows(conn.execute(q["lock_holder"], {"key": key, "now": now}), "owner")
    return next((str(owner) for (owner,) in rows), None)


# -- envelope -> parameters ----------------------------------------------------------------
def insert_params(
    env: Envelope,
    now: float,
    aging: float,
    headers: str | None = None,
    unique_key: str | None = None,
) -> dict[str, Any]:
    """`insert_message`'s parameters for one envelope."""
    return {
        "queue": env.queue,
        "id": env.id,
        "body": env.body,
        "headers": headers_json(env.headers) if headers is None else headers,
        "now": now,
        "delay": env.delay,
        "max_attempts": env.max_attempts,
        "visibility_timeout": env.visibility_timeout,
        "keep_id": env.keep_id,
        "unique_key": unique_key,
        "priority": env.priority,
        "head_start": float(env.priority * aging),
        "limits": limits_json(env.limits),
    }


def _batch_params(
    dialect: Dialect, envelopes: Sequence[Envelope], now: float, aging: float
) -> dict[str, Any]:
    """`insert_batch`'s parameters: parallel arrays, one element per envelope, except
    that a column with one value for the whole batch is sent as that one value."""
    values = dialect.values
    return {
        "now": now,
        "queues": values(_shared([e.queue for e in envelopes])),
        "ids": values([e.id for e in envelopes]),
        "bodies": values([e.body for e in envelopes]),
        "headers": values(_shared_headers(envelopes)),
        "delays": values(_shared([e.delay for e in envelopes])),
        "max_attempts": values(_shared([e.max_attempts for e in envelopes])),
        "visibility_timeouts": values(_shared([e.visibility_timeout for e in envelopes])),
        "keep_ids": values(_shared([e.keep_id for e in envelopes])),
        "priorities": values(_shared([e.priority for e in envelopes])),
        "head_starts": values(_shared([float(e.priority * aging) for e in envelopes])),
        "limits": values(_shared([limits_json(e.limits) for e in envelopes])),
    }


def _shared(column: list[Any]) -> list[Any]:
    """`[value]` when every element is that value (`insert_batch` reads a one-element
    array as the value of every row), else the column as it is."""
    first = column[0]
    if column.count(first) == len(column):
        return [first]
    return column


def _shared_headers(envelopes: Sequence[Envelope]) -> list[str]:
    """`_shared` for the headers, encoded once when every envelope has the same dict (a
    batch of one job's calls does: it is often the very same object)."""
    first = envelopes[0].headers
    if all(e.headers is first or e.headers == first for e in envelopes):
        return [headers_json(first)]
    return [headers_json(e.headers) for e in envelopes]


def headers_json(headers: Mapping[str, str]) -> str:
    return orjson.dumps(dict(headers)).decode() if headers else _EMPTY_HEADERS_JSON
