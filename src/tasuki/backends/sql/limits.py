"""Rate and concurrency limits on the SQL backends: admission at lease time, wake-ups.

The `lease` statement leases rows without limits as before (they pay one column read)
and holds those with limits, unchanged; `admit` then decides them in one transaction:
- a **concurrency** slot is a row of `tasuki_slots` (key, queue, id, token) that holds
  while its lease does: the message is in flight under that token and its lease has not
  expired. Nothing copies the expiry: keep and extend move the message's `visible_at`,
  and with it the slot's life; a lapsed or fenced-out lease holds nothing, and its row
  is pruned when the key is next counted;
- a **rate** is a sliding log (`tasuki_rate_starts`): at most `limit` starts with a time
  in the last `per` seconds, so no window of that length ever holds more.
A message within all its limits is leased, takes its slots and its tokens; one over a
limit is parked, costing no attempt: waiting, not ready (the stats count it delayed),
until its next token is due (a rate) or until a slot of its key is freed, and at the
latest when the soonest live holder's lease expires (a concurrency key, `parked_on`).
Parked messages are not due, so the lease's index walk never reads them: one key over
its limit holds back neither other keys nor unlimited messages of the queue.

A settle, a cancel or a release that ends a lease holding slots deletes their rows and
wakes one parked message per slot freed (`free`). On PostgreSQL both run under
transaction-level advisory locks on the keys (`limit_lock_keys`), so two admissions never
count the same free slot twice, and a wake-up cannot slip between an admission's count
and its park (it waits for the park's commit and then sees it); SQLite's writes are
serialized already.

Each step is one statement for all the keys or messages of a lease or a settle. Lists of
tuples go to the statements both as parallel arrays (PostgreSQL unnests them together)
and as one list of rows (`rows`: SQLite reads each row's fields from one JSON array).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from tasuki.backends.base import Limit
from tasuki.backends.sql.dialect import Connection, Dialect, named_rows

# A rate's next token is due when its oldest start leaves the window: looked at a hair
# later, so that the clock's rounding never makes it find the start still inside.
_EPSILON = 1e-6


def limits_json(limits: Sequence[Limit]) -> str | None:
    """A message's limits as its row keeps them (NULL for none: the lease's fast path)."""
    if not limits:
        return None
    return orjson.dumps([[lim.key, lim.kind, lim.limit, lim.per] for lim in limits]).decode()


@dataclass
class _Key:
    """What the admission knows of one key: read once, counted on as it admits."""

    live: int = 0
    next_free: float | None = None  # concurrency: the soonest live holder's expiry
    next_token: float | None = None  # rate: when the first start in the window leaves it


@dataclass
class Admitted:
    """What `admit` did: the `lease` rows of the messages it leased, and how many of the
    messages it decided were waiting before (leased now) or in flight (parked now)."""

    rows: list[tuple[Any, ...]]
    parked: int = 0
    from_waiting: int = 0
    to_waiting: int = 0


def admit(
    conn: Connection,
    dialect: Dialect,
    queue: str,
    ids: list[str],
    params: dict[str, Any],
    names: Sequence[str],
    clock: Callable[[], float],
    room: int | None = None,
    lead: int | None = None,
) -> Admitted:
    """Decide the messages the `lease` statement held (`ids`, in its order) and lease
    those within their limits, in the transaction open on `conn`; `params` are the
    lease's (`nonce`, `visibility_timeout`), `names` its columns. The time of the starts
    is read once the keys are locked: a start is stamped after every admission it
    waited for, never before (an older stamp would leave its window early). At most
    `room` are leased, and only among the first `lead` of `ids` (those no unlimited
    message ranks before): a message within its limits past either is left as it is,
    due, for the lease to take in its turn; one over a limit is parked wherever it is."""
    q, values = dialect.queries, dialect.values
    cursor = conn.execute(q["limit_candidates"], {**params, "ids": values(ids)})
    found = {i: (state, orjson.loads(lims)) for i, state, lims in named_rows(
        cursor, "id", "state", "limits")}  # fmt: skip
    order = [i for i in ids if i in found]  # the lease's order; gone ones were taken
    if not order:
        return Admitted([])
    limits = {i: [Limit(k, kind, n, per) for k, kind, n, per in found[i][1]] for i in order}
    _lock_keys(conn, dialect, limits.values())
    now = clock()
    params = {**params, "now": now}
    keys = _read_keys(conn, dialect, limits.values(), now)
    vt = float(params["visibility_timeout"])
    admitted: list[str] = []
    parked: list[tuple[str, float, str | None]] = []  # (id, until, key)
    leadable = set(ids if lead is None else ids[:lead])
    for msg_id in order:
        over = _over(limits[msg_id], keys, now, vt)
        if over is None:
            if msg_id not in leadable or (room is not None and len(admitted) >= room):
                continue  # not its turn, or no place for it: the lease takes it later
            admitted.append(msg_id)
            for lim in limits[msg_id]:
                key = keys[lim.key]
                key.live += 1
                if lim.kind == "rate" and key.next_token is None:
                    key.next_token = now + lim.per
        else:
            parked.append((msg_id, *over))
    out = Admitted([], parked=len(parked))
    if admitted:
        cursor = conn.execute(q["limit_lease"], {**params, "ids": values(admitted)})
        out.rows = named_rows(cursor, *names)
        _take(conn, dialect, queue, limits, out.rows, names, now)
    if parked:
        ids_, untils, parked_on = (list(column) for column in zip(*parked, strict=True))
        conn.execute(
            q["limit_park"],
            {"queue": queue, "ids": values(ids_), "untils": values(untils),
             "keys": values(parked_on), "rows": values([list(p) for p in parked])},
        )  # fmt: skip
    out.from_waiting = sum(1 for i in admitted if found[i][0] == 0)
    out.to_waiting = sum(1 for i, _, _ in parked if found[i][0] == 1)
    return out


def _lock_keys(conn: Connection, dialect: Dialect, all_limits: Iterable[list[Limit]]) -> None:
    """PostgreSQL: lock the keys, in the order of their hashes (`limit_lock_keys`)."""
    if "limit_lock_keys" in dialect.queries:
        keys = sorted({lim.key for lims in all_limits for lim in lims})
        conn.execute(dialect.queries["limit_lock_keys"], {"keys": dialect.values(keys)})


def _read_keys(
    conn: Connection, dialect: Dialect, all_limits: Iterable[list[Limit]], now: float
) -> dict[str, _Key]:
    """Each key's live holders (concurrency) or starts in the window (rate): a statement
    for all the keys of each kind."""
    q, values = dialect.queries, dialect.values
    kinds: dict[str, str] = {}
    for lims in all_limits:
        for lim in lims:
            kinds.setdefault(lim.key, lim.kind)
    slots = sorted(k for k, kind in kinds.items() if kind == "concurrency")
    rates = sorted(k for k, kind in kinds.items() if kind == "rate")
    keys: dict[str, _Key] = {}
    if slots:
        cursor = conn.execute(q["slot_holders"], {"keys": values(slots), "now": now})
        stale = []
        for k, rows, live, next_free in named_rows(cursor, "key", "rows_", "live", "next_free"):
            keys[k] = _Key(int(live), None if next_free is None else float(next_free))
            if rows > live:
                stale.append(k)
        if stale:  # rows of leases that are over: given back while the key is locked
            conn.execute(q["slots_prune"], {"keys": values(stale), "now": now})
    if rates:
        cursor = conn.execute(q["rate_window"], {"keys": values(rates), "now": now})
        for k, started, due in named_rows(cursor, "key", "started", "next_token"):
            keys[k] = _Key(int(started), next_token=None if due is None else float(due))
    return keys


def _over(
    limits: list[Limit], keys: dict[str, _Key], now: float, vt: float
) -> tuple[float, str | None] | None:
    """None when every limit lets the message start now; else until when it waits, and
    the concurrency key whose freed slot wakes it (None: a rate's token)."""
    for lim in limits:
        key = keys[lim.key]
        if key.live < lim.limit:
            continue
        if lim.kind == "concurrency":
            # At the latest when the soonest holder's lease expires (one admitted here
            # holds until now + its lease, at least `vt` when it has its own).
            soonest = key.next_free if key.next_free is not None else now + vt
            return max(soonest, now), lim.key
        due = key.next_token if key.next_token is not None else now + lim.per
        return due + _EPSILON, None
    return None


def _take(
    conn: Connection,
    dialect: Dialect,
    queue: str,
    limits: dict[str, list[Limit]],
    rows: list[tuple[Any, ...]],
    names: Sequence[str],
    now: float,
) -> None:
    """The leased messages hold their slots under their new tokens and spend a token of
    each rate (the key's log pruned to its window): a statement each."""
    q, values = dialect.queries, dialect.values
    slots: dict[tuple[str, str], str] = {}  # (key, id) -> token
    starts: list[tuple[str, float]] = []  # (key, per)
    at_id, at_token = names.index("id"), names.index("token")
    for row in rows:
        msg_id, token = row[at_id], row[at_token]
        for lim in limits[msg_id]:
            if lim.kind == "concurrency":
                slots[lim.key, msg_id] = token
            else:
                starts.append((lim.key, lim.per))
    if slots:
        conn.execute(
            q["slot_take"],
            {"queue": queue, "keys": values([k for k, _ in slots]),
             "ids": values([i for _, i in slots]), "tokens": values(list(slots.values())),
             "rows": values([[k, i, t] for (k, i), t in slots.items()])},
        )  # fmt: skip
    if starts:
        conn.execute(
            q["rate_take"],
            {"keys": values([k for k, _ in starts]), "pers": values([p for _, p in starts]),
             "rows": values([list(s) for s in starts]), "now": now},
        )  # fmt: skip
        pruned = sorted({k for k, _ in starts})
        conn.execute(q["rate_prune"], {"keys": values(pruned), "now": now})


def free(
    conn: Connection, dialect: Dialect, leases: Sequence[tuple[str, str, str]], now: float
) -> set[str]:
    """Leases (queue, id, token) that ended holding slots: their rows go, and each slot
    freed wakes one message parked for its key. Returns the queues of those woken."""
    if not leases:
        return set()
    q, values = dialect.queries, dialect.values
    cursor = conn.execute(
        q["slots_free"],
        {"queues": values([lease[0] for lease in leases]),
         "ids": values([lease[1] for lease in leases]),
         "tokens": values([lease[2] for lease in leases]),
         "rows": values([list(lease) for lease in leases])},
    )  # fmt: skip
    freed = Counter(key for (key,) in named_rows(cursor, "key"))
    if not freed:
        return set()
    keys = sorted(freed)
    if "limit_lock_keys" in q:
        conn.execute(q["limit_lock_keys"], {"keys": values(keys)})
    # Under the keys' locks: a message parked by an admission that counted these slots
    # as held has been committed, and is seen here.
    cursor = conn.execute(q["limit_parked_keys"], {"keys": values(keys)})
    waiting = sorted(key for (key,) in named_rows(cursor, "key"))
    if not waiting:
        return set()
    runs = dialect.many(
        conn, q["limit_wake"], [{"key": k, "n": freed[k], "now": now} for k in waiting],
        ("queue",),
    )  # fmt: skip
    return {queue for _, rows in runs for (queue,) in rows}
