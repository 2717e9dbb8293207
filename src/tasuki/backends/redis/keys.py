"""Every Redis key the backend uses, with its type and meaning, in one place.

All keys start with the URL's `prefix` (default `tasuki:`). A queue's keys share the hash
tag `{<queue>}`, so on Redis Cluster one queue lives in one slot and every script can
touch all of it atomically. Per queue, with `B = <prefix>{<queue>}:`:

| key | type | meaning |
|---|---|---|
| `B waiting` | ZSET | waiting messages; score = rank, µs: visible time - priority x aging |
| `B delayed` | ZSET | delayed messages of priority > 0; score = visible time, µs |
| `B leased` | ZSET | messages in flight; score = lease expiry, µs |
| `B leases` | HASH | id -> token of its current lease, for exactly the ids in `leased` |
| `B dead` | ZSET | dead letters; score = when it died, µs |
| `B m:<id>` | HASH | one message, in whatever state (fields below) |
| `B keep` | HASH | id -> `keep_id` (ms), for messages enqueued with a finished-id window |
| `B done:<id>` | STRING, PX | a finished id, remembered for its `keep_id` window |
| `B signal` | LIST, PX | wake-up tokens for blocked `lease(wait=...)` calls |
| `B results` | HASH | id -> `keep_result` (ms), for messages whose result is pending |
| `B r:<id>` | STRING, PX | a settled result: `o` + JSON value, or `f` + `error_json` |
| `B waiters` | HASH | ids whose pending result someone waits for (`wait_result`) |
| `B n:<id>` | LIST, PX | a waiter's wake-up token, pushed with the result (5 s) |
| `B limited` | HASH | id -> its limits (JSON), for messages enqueued with some |
| `B lim:<name>` | ZSET | a concurrency limit's holders (id -> lease expiry), a rate's starts |
| `B park:<name>` | ZSET | messages parked for a slot of a concurrency limit, oldest first |
| `B x:<id>` | STRING, PX | a cancelled id (window: keep_id, at least 1 h) -> fenced token |
| `B counts` | HASH | `acked`, `dead`: messages settled (rates); reliability meters |
| `B js:<minute>` | HASH, PXAT | a minute's job stats: `<job>` LF `<count>` -> total, a day |
| `H f:<flow>` | HASH, PX | a flow's record: `static` JSON, `result`, `failure`, `cancelled` |
| `H fn:<flow>` | LIST, PX | a `wait_flow` wake-up token, pushed when the flow ends (5 s) |
| `H fb:<barrier>:<flow>` | HASH, PX | a group's barrier: slot number -> member's value |
| `H fv:<barrier>:<flow>` | STRING, PX | a complete barrier's value, the JSON array of its slots |

`H` is the base of a flow's home queue, the queue of its first step: a flow's keys live
in its slot, with that queue's messages.

A message's state is the ZSET that holds its id, nothing else: there is no `state`
field that could disagree with the index. "Ready" is `waiting` with score <= now, plus
`delayed` and `leased` with score <= now (a delay passed, an expired lease is
deliverable again); "delayed" is `waiting` or `delayed` above now; "in flight" is
`leased` above now. A message of priority p > 0 ranks in `waiting` p x `priority_aging`
ahead of its visible time; delayed, it waits in `delayed` instead (its rank would
make it due early) until a lease moves it into `waiting`.

Lease tokens and keep windows live in per-queue hashes rather than in each message's
hash so that settle and extend check and clear a whole batch with one HMGET / HDEL
each, instead of one command per message: settling is the hot path.

Fields of `B m:<id>` (times are whole microseconds of the Redis server's clock):

| field | set by | meaning |
|---|---|---|
| `body` | enqueue (replace) | the payload, bytes |
| `headers` | enqueue (replace) | JSON object of str -> str |
| `max_attempts` | enqueue | leases allowed before the message is dead-lettered |
| `vt_us` | enqueue | the message's own visibility timeout; absent: the lease call's |
| `enqueued_us` | enqueue | when it was first stored |
| `unique` | enqueue | full key of the uniqueness lock it claimed, if any |
| `attempt` | lease, settle (release), redrive | leases so far (absent = 0) |
| `fence` | lease | fencing number, only ever grows (absent = 0) |
| `reason`, `died_us` | settle (dead), lease (exhausted) | why and when it died |
| `error_type`, `error_message`, `error_traceback` | settle (dead) | the last error |
| `hist` | settle (release, dead), lease (lost) | how its last leases ended, JSON (`inspect`) |
| `priority`, `boost_us` | enqueue (priority > 0) | priority; priority x aging (µs) |
| `limits` | enqueue (limits) | JSON [[name, 'c' or 'r', limit, per µs], ...] |
| `result_ms` | enqueue (keep_result) | its result's TTL (redrive: pending again) |
| `progress` | keep | `<fence> <JSON [fraction, text]>`, shown while that fence is current |
| `sn`, `s:<n>` | record_step, take_signal | durable step records: how many, and each (cmsgpack) |
| `g:<name>` | send_signal, take_signal | signals `name` stored and not consumed (cmsgpack list) |
| `wait` | settle (suspend), send_signal | `<fence> <until µs> <signal>`: a suspended run's wait |

Outside the queues:

| key | type | meaning |
|---|---|---|
| `<prefix>queues` | SET | names of queues ever enqueued to (`queues()` keeps the non-empty) |
| `<prefix>lock:<key>` | STRING, PX | a lock of the lock service: value = owner, TTL = lease |
| `<prefix>flow:<flow>` | STRING, PX | a flow's home queue (where its keys are), for its retention |
| `<prefix>paused` | SET | names of the queues paused (the console), read by every worker |
| `<prefix>{workers}:info` | HASH | worker id -> its last announce (JSON) |
| `<prefix>{workers}:seen` | ZSET | worker id -> when it last announced (µs); dropped a day on |
| `<prefix>{workers}:stop` | SET | ids of the workers asked to stop (`stop_worker`) |

The pause SET and the registry span queues, so on Redis Cluster each sits in a slot of
its own, away from the queues' (the registry's three keys share the tag `{workers}`, so
one script updates them together).

Lock keys are whatever the caller names. A caller that puts a hash tag in the key
(`{myqueue}unique:...`, as the uniqueness and dedup middleware do) places the lock in
that queue's slot, which is what lets `enqueue.lua` claim a uniqueness lock in the same
atomic step as the enqueue on Redis Cluster. For that reason neither the prefix nor a
queue name may contain braces.
"""

from __future__ import annotations

from dataclasses import dataclass

from tasuki.errors import InvalidArgument, InvalidURL

DEFAULT_PREFIX = "tasuki:"


@dataclass(frozen=True, slots=True)
class QueueKeys:
    """The keys of one queue. Scripts build `base .. 'm:' .. id` and `'done:' .. id`."""

    base: str
    waiting: str
    leased: str
    leases: str
    dead: str
    keep: str
    signal: str
    counts: str
    delayed: str
    results: str
    waiters: str
    limited: str


class KeySpace:
    """Key names under one prefix; queue keys are cached (they are built per call)."""

    def __init__(self, prefix: str = DEFAULT_PREFIX) -> None:
        if "{" in prefix or "}" in prefix:
            raise InvalidURL(
                f"redis key prefix {prefix!r} may not contain braces: they would change "
                "the hash tag that keeps a queue in one Redis Cluster slot"
            )
        self.prefix = prefix
        self.queues = f"{prefix}queues"
        self._lock_prefix = f"{prefix}lock:"
        self._flow_prefix = f"{prefix}flow:"
        self.paused = f"{prefix}paused"
        # The worker registry's info HASH, seen ZSET and stop SET: one slot of their own.
        self.workers = tuple(f"{prefix}{{workers}}:{part}" for part in ("info", "seen", "stop"))
        self._cache: dict[str, QueueKeys] = {}

    def queue(self, name: str) -> QueueKeys:
        keys = self._cache.get(name)
        if keys is None:
            if "{" in name or "}" in name:
                raise InvalidArgument(f"queue name {name!r} may not contain braces")
            base = f"{self.prefix}{{{name}}}:"
            keys = QueueKeys(
                base=base,
                waiting=base + "waiting",
                leased=base + "leased",
                leases=base + "leases",
                dead=base + "dead",
                keep=base + "keep",
                signal=base + "signal",
                counts=base + "counts",
                delayed=base + "delayed",
                results=base + "results",
                waiters=base + "waiters",
                limited=base + "limited",
            )
            if len(self._cache) < 10_000:
                self._cache[name] = keys
        return keys

    def lock(self, key: str) -> str:
        return self._lock_prefix + key

    def flow_home(self, flow_id: str) -> str:
        """The key naming a flow's home queue: `flow(id)` finds the flow's keys by it."""
        return self._flow_prefix + flow_id


@dataclass(frozen=True, slots=True)
class FlowKeys:
    """The keys of one flow, under the base of its home queue (`lua/includes/flows.lua`)."""

    base: str
    flow_id: str

    @property
    def record(self) -> str:
        return f"{self.base}f:{self.flow_id}"

    @property
    def notify(self) -> str:
        return f"{self.base}fn:{self.flow_id}"

    def slots(self, barrier: str) -> str:
        return f"{self.base}fb:{barrier}:{self.flow_id}"

    def value(self, barrier: str) -> str:
        return f"{self.base}fv:{barrier}:{self.flow_id}"
