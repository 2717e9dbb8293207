"""`redis://`, `rediss://`, `unix://` — many machines, high throughput.

Every state change is one Lua script per queue per call (`lua/*.lua`, one file per
operation), so the lifecycle is enforced by Redis atomically and nothing here does
read-modify-write. Times are the Redis server's clock, read inside the scripts; callers
pass durations. Python's part is to group a batch by queue, flatten it into ARGV, call
the script by SHA and turn the flat reply into values: one round trip per queue per
batch, whatever the batch size (up to `CHUNK` messages per script call, so one call
never holds Redis for long).

An idle `lease(wait=...)` blocks in BLPOP on the queue's signal list, which enqueue,
release and redrive push to; the lease script tells it when the next delayed message
or lease falls due, so it wakes for that too. See docs/redis.md for the whole design.

Its length is one short method per backend operation (each a flatten-call-unflatten of
one script); the logic of each is in its `.lua` file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import orjson

from tasuki.backends.base import (
    DEFAULT_VISIBILITY_TIMEOUT,
    FOREVER,
    Backend,
    Bury,
    Capabilities,
    Delivery,
    Enqueued,
    EnqueueStatus,
    Envelope,
    HistoryEntry,
    LockHolder,
    LockStore,
    MessageInfo,
    QueueStats,
    Receipt,
    Release,
    Reliability,
    SettledTotals,
    refuse_connection,
)
from tasuki.backends.redis import connection
from tasuki.backends.redis.connection import Connection, RedisOptions
from tasuki.backends.redis.keys import KeySpace, QueueKeys
from tasuki.backends.redis.slots import key_slot
from tasuki.backends.waiting import lease_until
from tasuki.core.message import DeadLetter, ErrorInfo
from tasuki.core.records import MessageState, death_detail, release_event, waiting_state
from tasuki.errors import BackendError, InvalidArgument, MessageTooLarge

T = TypeVar("T")

# Messages (or receipts) per script call: bounds how long one call holds Redis.
CHUNK = 1000
# An enqueue this large is sent as several script calls, each on its way while the
# next is built (Connection.run_each).
PIPELINED = 250
# Messages removed per script call by purge / purge_dead / redrive-all.
PURGE_CHUNK = 1000
# How often a producer re-adds a queue to the `queues` set (it is a SET: re-adding is free).
ANNOUNCE_EVERY = 60.0
# A blocked lease never sleeps less than this in BLPOP; shorter pauses sleep locally.
MIN_BLOCK = 0.01
# In the last tick before a delayed message is due, re-check this often (see `_pause`).
FINAL_STRETCH_STEP = 0.02

# Enqueue verdicts by the code enqueue.lua returns.
_STATUS: tuple[EnqueueStatus, ...] = ("enqueued", "duplicate", "conflict", "replaced")
_EMPTY_HEADERS = b"{}"


def _us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def _ms(seconds: float) -> int:
    """A TTL for PX: at least 1 ms (Redis refuses 0), so a zero TTL lapses at once."""
    return max(1, round(seconds * 1000))


def _headers_json(headers: Any) -> bytes:
    if not headers:
        return _EMPTY_HEADERS
    return orjson.dumps(headers if type(headers) is dict else dict(headers))


def _headers(raw: bytes) -> dict[str, str]:
    if raw == _EMPTY_HEADERS or not raw:
        return {}
    headers: dict[str, str] = orjson.loads(raw)
    return headers


class RedisBackend(Backend):
    """The Backend interface on Redis (or Redis Cluster); `from_url` builds one."""

    def __init__(self, options: RedisOptions) -> None:
        self.url = options.url
        self.capabilities = Capabilities(max_message_size=options.max_message_size)
        self.keys = KeySpace(options.prefix)
        self._options = options
        self._conn = connection.acquire(options)
        self._closed = False
        self._max_block = max(0.05, options.socket_timeout / 2)
        self._locks = RedisLockStore(self)

    # -- plumbing --------------------------------------------------------------------
    def _connection(self) -> Connection:
        """This process's connection, connected; a forked child gets its own."""
        if self._closed:
            raise BackendError(f"the Redis backend {self.url} is closed")
        conn = self._conn
        if conn.pid != os.getpid():
            conn = self._conn = connection.acquire(self._options)
        if conn.scripts is None:
            conn.connect()
        return conn

    def _eval(self, name: str, keys: list[str], args: list[Any]) -> Any:
        return self._connection().run(name, keys, args)

    def _command(self, *args: Any) -> Any:
        """A plain command (not a script), on a single server or a Cluster alike."""
        return self._connection().command(*args)

    def _per_queue(
        self,
        items: Sequence[T],
        receipt: Callable[[T], Receipt],
        call: Callable[[QueueKeys, Sequence[T]], list[int]],
    ) -> list[bool]:
        """Run `call` once per queue (and per CHUNK items), answers back in input order."""
        if not items:
            return []
        first = receipt(items[0]).queue
        if all(receipt(item).queue == first for item in items):
            keys = self.keys.queue(first)
            results: list[bool] = []
            for start in range(0, len(items), CHUNK):
                results.extend(r == 1 for r in call(keys, items[start : start + CHUNK]))
            return results
        groups: dict[str, list[int]] = {}
        for n, item in enumerate(items):
            groups.setdefault(receipt(item).queue, []).append(n)
        out = [False] * len(items)
        for queue, indices in groups.items():
            keys = self.keys.queue(queue)
            for start in range(0, len(indices), CHUNK):
                part = indices[start : start + CHUNK]
                for n, r in zip(part, call(keys, [items[n] for n in part]), strict=True):
                    out[n] = r == 1
        return out

    def _announce(self, queue: str) -> None:
        """Add the queue to the `queues` set, at most once a minute per process.

        It is a key of its own slot on Cluster, so it can't join the enqueue script; it is
        added *before* the messages, so a listed queue may be empty but a queue with
        messages is always listed.
        """
        conn = self._connection()
        marker = (self.keys.queues, queue)
        now = time.monotonic()
        if now - conn.announced.get(marker, -ANNOUNCE_EVERY) >= ANNOUNCE_EVERY:
            self._command("SADD", self.keys.queues, queue)
            conn.announced[marker] = now

    # -- producing -------------------------------------------------------------------
    def enqueue(
        self, envelopes: Sequence[Envelope], connection: object | None = None
    ) -> list[Enqueued]:
        refuse_connection(self, connection)
        if not envelopes:
            return []
        self._check(envelopes)
        first = envelopes[0].queue
        if len(envelopes) == 1:  # one-by-one enqueue: the common case of a web request
            keys = self.keys.queue(first)
            self._announce(first)
            return self._enqueue_chunk(keys, list(envelopes))
        if all(env.queue == first for env in envelopes):
            groups = {first: list(range(len(envelopes)))}
        else:
            groups = {}
            for n, env in enumerate(envelopes):
                groups.setdefault(env.queue, []).append(n)
        results: list[Enqueued] = [Enqueued("", "duplicate")] * len(envelopes)
        for queue, indices in groups.items():
            keys = self.keys.queue(queue)
            self._announce(queue)
            for start in range(0, len(indices), CHUNK):
                part = indices[start : start + CHUNK]
                batch = [envelopes[n] for n in part]
                for n, result in zip(part, self._enqueue_chunk(keys, batch), strict=True):
                    results[n] = result
        return results

    def _check(self, envelopes: Sequence[Envelope]) -> None:
        """Refuse a bad batch before any of it is written."""
        limit = self.capabilities.max_message_size
        cluster = self._connection().cluster
        for env in envelopes:
            if len(env.body) > limit:
                raise MessageTooLarge(
                    f"message {env.id!r} is {len(env.body):,} bytes; the limit of "
                    f"{self.url} is {limit:,} (option max_message_size)"
                )
            claim = env.unique
            if cluster and claim is not None:
                lock_slot = key_slot(self.keys.lock(claim.key).encode())
                if lock_slot != key_slot(self.keys.queue(env.queue).waiting.encode()):
                    raise InvalidArgument(
                        f"unique key {claim.key!r} is not in the Redis Cluster slot of queue "
                        f"{env.queue!r}; start it with the queue's hash tag, "
                        f"e.g. '{{{env.queue}}}unique:...'"
                    )

    def _enqueue_chunk(self, keys: QueueKeys, batch: list[Envelope]) -> list[Enqueued]:
        """Store `batch` (one queue): one script call per PIPELINED messages, pipelined."""
        if len(batch) <= PIPELINED:
            script_keys, args = self._enqueue_call(keys, batch)
            return _enqueued(batch, self._eval("enqueue", script_keys, args))
        parts = [batch[i : i + PIPELINED] for i in range(0, len(batch), PIPELINED)]
        calls = (self._enqueue_call(keys, part) for part in parts)
        out: list[Enqueued] = []
        for part, reply in zip(parts, self._connection().run_each("enqueue", calls), strict=True):
            out += _enqueued(part, reply)
        return out

    def _enqueue_call(self, keys: QueueKeys, batch: list[Envelope]) -> tuple[list[str], list[Any]]:
        script_keys = [keys.waiting, keys.signal, keys.keep]
        args: list[Any] = [keys.base, len(batch)]
        for env in batch:
            claim = env.unique
            vt = "" if env.visibility_timeout is None else _us(env.visibility_timeout)
            if claim is None:
                lock_index, lock_ttl, replace = 0, 0, 0
            else:
                script_keys.append(self.keys.lock(claim.key))
                lock_index, lock_ttl, replace = len(script_keys) - 3, _ms(claim.ttl), claim.replace
            args += (
                env.id,
                env.body,
                _headers_json(env.headers),
                _us(env.delay),
                env.max_attempts,
                vt,
                _ms(env.keep_id) if env.keep_id > 0 else 0,
                lock_index,
                lock_ttl,
                1 if replace else 0,
            )
        return script_keys, args

    # -- consuming -------------------------------------------------------------------
    def lease(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
        wait: float = 0.0,
    ) -> list[Delivery]:
        if max_messages <= 0:
            return []
        keys, script_keys, args = self._lease_request(queue, max_messages, visibility_timeout)

        def try_lease() -> tuple[list[Delivery], int]:
            # The script returns the deliveries, or only the microseconds until the next
            # delayed message falls due (-1: none), which is the wait's hint.
            reply = self._eval("lease", script_keys, args)
            if len(reply) > 1:
                return _deliveries(queue, reply, visibility_timeout), -1
            return [], int(reply[0])

        def wait_for_change(remaining: float, hint_us: int) -> None:
            self._pause(keys.signal, remaining, hint_us)

        return lease_until(wait, try_lease, wait_for_change)

    def _lease_request(
        self, queue: str, max_messages: int, visibility_timeout: float
    ) -> tuple[QueueKeys, list[str], list[Any]]:
        keys = self.keys.queue(queue)
        script_keys = [keys.waiting, keys.leased, keys.dead, keys.leases, keys.counts]
        # The lease nonce: os.urandom, as secrets.token_hex, whose import (hmac, hashlib)
        # would add milliseconds to every worker's start.
        args = [keys.base, max_messages, _us(visibility_timeout), os.urandom(6).hex()]
        return keys, script_keys, args

    def lease_soon(
        self,
        queue: str,
        max_messages: int,
        visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
    ) -> Callable[[], list[Delivery]]:
        """The lease script sent now, its reply read later: Redis leases the next batch
        while the worker runs the current one."""
        if max_messages <= 0:
            return list
        _, script_keys, args = self._lease_request(queue, max_messages, visibility_timeout)
        finish = self._connection().run_soon("lease", script_keys, args)

        def leased() -> list[Delivery]:
            reply = finish()
            return _deliveries(queue, reply, visibility_timeout) if len(reply) > 1 else []

        return leased

    def _pause(self, signal: str, remaining: float, hint_us: int) -> None:
        """Sleep until a signal, the next message falls due (`hint_us`), or `remaining` ends.

        Redis wakes a BLPOP whose timeout passed only at its next tick (1/hz, 100 ms by
        default), too late for a delayed message that must start on time. So when the
        next due message is what ends the wait, BLPOP ends one tick early and the last
        tick is covered by a few short local sleeps, each followed by another lease:
        a delayed message starts within FINAL_STRETCH_STEP of its time, and a new
        message is noticed within the same step even then. Otherwise BLPOP blocks for
        all of `remaining` (a few ms late at worst, which only lengthens an empty wait).
        """
        due = hint_us / 1e6 if hint_us >= 0 else float("inf")
        granule = self._conn.granule
        if due <= remaining:
            if due <= granule + MIN_BLOCK:
                time.sleep(min(due, FINAL_STRETCH_STEP))
                return
            block = due - granule
        else:
            block = remaining
        if block < MIN_BLOCK:
            time.sleep(block)
            return
        block = min(block, self._max_block)
        self._command("BLPOP", signal, block)

    def ack(self, receipts: Sequence[Receipt]) -> list[bool]:
        def call(keys: QueueKeys, part: Sequence[Receipt]) -> list[int]:
            args: list[Any] = [keys.base]
            for r in part:
                args += (r.id, r.token)
            reply: list[int] = self._eval(
                "ack", [keys.leased, keys.leases, keys.keep, keys.counts], args
            )
            return reply

        return self._per_queue(receipts, _itself, call)

    def extend(self, receipts: Sequence[Receipt], visibility_timeout: float) -> list[bool]:
        def call(keys: QueueKeys, part: Sequence[Receipt]) -> list[int]:
            args: list[Any] = [_us(visibility_timeout)]
            for r in part:
                args += (r.id, r.token)
            reply: list[int] = self._eval("extend", [keys.leased, keys.leases], args)
            return reply

        return self._per_queue(receipts, _itself, call)

    def release(self, releases: Sequence[Release]) -> list[bool]:
        def call(keys: QueueKeys, part: Sequence[Release]) -> list[int]:
            args: list[Any] = [keys.base]
            for item in part:
                r = item.receipt
                event, detail = release_event(item.delay, item.penalty, item.error)
                args += (r.id, r.token, _us(item.delay), 0 if item.penalty else 1, event, detail)
            script_keys = [keys.waiting, keys.leased, keys.leases, keys.signal]
            reply: list[int] = self._eval("release", script_keys, args)
            return reply

        return self._per_queue(releases, _receipt_of, call)

    def bury(self, burials: Sequence[Bury]) -> list[bool]:
        def call(keys: QueueKeys, part: Sequence[Bury]) -> list[int]:
            args: list[Any] = [keys.base]
            for item in part:
                r, err = item.receipt, item.error
                detail = death_detail(item.reason, err)
                if err is None:
                    args += (r.id, r.token, item.reason, "", "", "", detail)
                else:
                    args += (
                        r.id,
                        r.token,
                        item.reason,
                        err.type,
                        err.message,
                        err.traceback,
                        detail,
                    )
            reply: list[int] = self._eval(
                "bury", [keys.leased, keys.leases, keys.dead, keys.counts], args
            )
            return reply

        return self._per_queue(burials, _receipt_of, call)

    # -- operating -------------------------------------------------------------------
    def stats(self, queue: str) -> QueueStats:
        keys = self.keys.queue(queue)
        ready, in_flight, delayed, dead, age = self._eval(
            "stats", [keys.waiting, keys.leased, keys.dead], []
        )
        return QueueStats(ready, in_flight, delayed, dead, age / 1e6)

    def queues(self) -> list[str]:
        names = sorted(m.decode() for m in self._command("SMEMBERS", self.keys.queues))
        if not names:
            return []
        exists = []
        for name in names:
            keys = self.keys.queue(name)
            exists.append(("EXISTS", keys.waiting, keys.leased, keys.dead))
        counts = self._connection().pipeline(exists)
        return [name for name, n in zip(names, counts, strict=True) if n]

    def dead_letters(self, queue: str, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        keys = self.keys.queue(queue)
        reply = self._eval("dead_letters", [keys.dead], [keys.base, max(0, offset), limit])
        return _dead_letters(queue, reply)

    def dead_letter(self, queue: str, id: str) -> DeadLetter | None:
        keys = self.keys.queue(queue)
        letters = _dead_letters(queue, self._eval("dead_letter", [keys.dead], [keys.base, id]))
        return letters[0] if letters else None

    def in_flight(self, queue: str, limit: int = 100) -> list[MessageInfo]:
        keys = self.keys.queue(queue)
        reply = self._eval("in_flight", [keys.leased], [keys.base, limit])
        return [
            MessageInfo(
                queue,
                reply[i].decode(),
                "in_flight",
                attempt=int(reply[i + 2]),
                max_attempts=int(reply[i + 3]),
                fencing_token=int(reply[i + 4]),
                enqueued_at=int(reply[i + 5]) / 1e6,
                lease_expires_at=float(reply[i + 1]) / 1e6,
            )
            for i in range(0, len(reply), 6)
        ]

    def settled_totals(self, queue: str) -> SettledTotals:
        acked, dead = self._command("HMGET", self.keys.queue(queue).counts, "acked", "dead")
        return SettledTotals(int(acked or 0), int(dead or 0))

    def reliability(self, queue: str) -> Reliability:
        raw = self._command("HGETALL", self.keys.queue(queue).counts) or []
        fields = {raw[i].decode(): int(raw[i + 1]) for i in range(0, len(raw), 2)}
        return Reliability.from_meters(fields)

    def add_meters(self, queue: str, increments: Mapping[str, int]) -> None:
        args: list[Any] = []
        for name, value in increments.items():
            if value:
                args += [name, int(value)]
        if args:
            self._eval("add_meters", [self.keys.queue(queue).counts], args)

    def inspect(self, queue: str, id: str) -> MessageInfo:
        keys = self.keys.queue(queue)
        reply = self._eval("inspect", [keys.waiting, keys.leased, keys.dead], [keys.base, id])
        now, where = int(reply[0]) / 1e6, reply[1].decode()
        if where == "none":
            return MessageInfo(queue, id, "unknown")
        if where == "done":
            return MessageInfo(
                queue,
                id,
                "finished",
                finished_until=now + int(reply[2]) / 1e3,
                history=_history(reply[3]),
            )
        at = float(reply[2]) / 1e6
        attempt, max_attempts, fence, enqueued, reason, etype, emessage, etb, hist = reply[3:]
        state: MessageState
        visible_at = lease_expires_at = died_at = None
        if where == "dead":
            state, died_at = "dead", at
        elif where == "leased" and at > now:
            state, lease_expires_at = "in_flight", at
        else:
            state, visible_at = waiting_state(at, now), at
        return MessageInfo(
            queue,
            id,
            state,
            attempt=int(attempt or 0),
            max_attempts=int(max_attempts) if max_attempts else None,
            fencing_token=int(fence or 0),
            enqueued_at=int(enqueued) / 1e6 if enqueued else None,
            visible_at=visible_at,
            lease_expires_at=lease_expires_at,
            reason=reason.decode() if state == "dead" else "",
            error=ErrorInfo(etype.decode(), emessage.decode(), etb.decode())
            if etype and state == "dead"
            else None,
            died_at=died_at,
            history=_history(hist),
        )

    def redrive(self, queue: str, ids: Sequence[str] | None = None) -> int:
        keys = self.keys.queue(queue)
        script_keys = [keys.waiting, keys.dead, keys.signal]
        total = 0
        if ids is None:
            while True:
                n: int = self._eval("redrive", script_keys, [keys.base, PURGE_CHUNK])
                total += n
                if n < PURGE_CHUNK:
                    return total
        for start in range(0, len(ids), CHUNK):
            part = list(ids[start : start + CHUNK])
            if part:
                total += self._eval("redrive", script_keys, [keys.base, len(part), *part])
        return total

    def purge_dead(self, queue: str) -> int:
        keys = self.keys.queue(queue)
        return self._drain("purge_dead", [keys.dead, keys.keep], keys.base)

    def purge(self, queue: str) -> int:
        keys = self.keys.queue(queue)
        script_keys = [keys.waiting, keys.leased, keys.dead, keys.leases, keys.keep, keys.signal]
        return self._drain("purge", script_keys, keys.base)

    def _drain(self, script: str, keys: list[str], base: str) -> int:
        """Call a chunked removal script until a call removes less than a full chunk."""
        total = 0
        while True:
            n: int = self._eval(script, keys, [base, PURGE_CHUNK])
            total += n
            if n < PURGE_CHUNK:
                return total

    @property
    def locks(self) -> RedisLockStore:
        return self._locks

    def ping(self) -> None:
        self._command("PING")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._conn.pid == os.getpid():
            connection.release(self._conn)


class RedisLockStore(LockStore):
    """Locks as `<prefix>lock:<key>` strings (value = owner, PX = TTL), changed by Lua.

    A lapsed lock is an expired key, so Redis itself forgets it; every change compares
    the owner on the server in the same step.
    """

    def __init__(self, backend: RedisBackend) -> None:
        self._backend = backend
        self._lock_key = backend.keys.lock

    def acquire(self, key: str, owner: str, ttl: float) -> bool:
        return bool(self._backend._eval("lock_acquire", [self._lock_key(key)], [owner, _ms(ttl)]))

    def renew(self, keys: Sequence[str], owner: str, ttl: float) -> list[bool]:
        if not keys:
            return []
        full = [self._lock_key(k) for k in keys]
        backend = self._backend
        if not backend._connection().cluster:
            return [r == 1 for r in backend._eval("lock_renew", full, [owner, _ms(ttl)])]
        by_slot: dict[int, list[int]] = {}
        for n, k in enumerate(full):
            by_slot.setdefault(key_slot(k.encode()), []).append(n)
        out = [False] * len(full)
        for indices in by_slot.values():
            reply = backend._eval("lock_renew", [full[n] for n in indices], [owner, _ms(ttl)])
            for n, r in zip(indices, reply, strict=True):
                out[n] = r == 1
        return out

    def release(self, key: str, owner: str) -> bool:
        return bool(self._backend._eval("lock_release", [self._lock_key(key)], [owner]))

    def swap(self, key: str, owner: str, new_owner: str, ttl: float) -> bool:
        args = [owner, new_owner, _ms(ttl)]
        return bool(self._backend._eval("lock_swap", [self._lock_key(key)], args))

    def holder(self, key: str) -> LockHolder | None:
        reply = self._backend._eval("lock_holder", [self._lock_key(key)], [])
        if not reply:
            return None
        owner, pttl = reply
        return LockHolder(owner.decode(), pttl / 1000 if pttl >= 0 else FOREVER)


def _itself(receipt: Receipt) -> Receipt:
    return receipt


def _receipt_of(item: Release | Bury) -> Receipt:
    return item.receipt


def _enqueued(batch: list[Envelope], reply: list[Any]) -> list[Enqueued]:
    out: list[Enqueued] = []
    for env, r in zip(batch, reply, strict=True):
        if isinstance(r, int):
            out.append(Enqueued(env.id, _STATUS[r]))
        else:
            out.append(Enqueued(r[1].decode(), _STATUS[r[0]]))
    return out


def _deliveries(queue: str, reply: list[Any], default_vt: float) -> list[Delivery]:
    """The lease script's flat reply (a hint, then 9 fields per message) as Deliveries."""
    fields = iter(reply)
    next(fields)
    return [
        Delivery(
            queue,
            msg_id.decode(),
            body,
            _headers(headers),
            attempt,
            max_attempts,
            int(enqueued_us) / 1e6,
            token.decode(),
            fence,
            vt_us / 1e6 if vt_us else default_vt,
        )
        for msg_id, body, headers, attempt, max_attempts, enqueued_us, token, fence, vt_us in zip(
            *[fields] * 9, strict=True
        )
    ]


def _history(raw: bytes) -> tuple[HistoryEntry, ...]:
    """The `hist` field (or a finished id's value): see lua/includes/history.lua."""
    if not raw or raw == b"1":
        return ()
    return tuple(
        HistoryEntry(int(at) / 1e6, event, int(fence), detail)
        for at, event, fence, detail in orjson.loads(raw)
    )


def _dead_letters(queue: str, reply: list[bytes]) -> list[DeadLetter]:
    """10 fields per letter, as pushed by `includes/dead_letter_fields.lua`."""
    fields = iter(reply)
    return [
        DeadLetter(
            id=msg_id.decode(),
            queue=queue,
            body=body,
            headers=_headers(headers),
            attempt=int(attempt or 0),
            reason=reason.decode(),
            error=ErrorInfo(etype.decode(), emessage.decode(), etb.decode()) if etype else None,
            died_at=int(died) / 1e6 if died else 0.0,
            enqueued_at=int(enqueued) / 1e6 if enqueued else 0.0,
        )
        for msg_id, body, headers, attempt, reason, etype, emessage, etb, died, enqueued in zip(
            *[fields] * 10, strict=True
        )
    ]
