"""The console on Redis (`core/console.py`, DESIGN §4d): pauses, listings by state,
actions that re-check each message's state, the worker registry and per-job stats, each
one script (`lua/browse.lua`, `retry_many.lua`, `cancel_many.lua`, `announce.lua`,
`workers.lua`, `add_tallies.lua`, `job_stats.lua`) or one plain command.

Where things live (docs/redis.md, "The console"):
- A listing walks the ZSETs the lease keeps already (`waiting` and `delayed` for ready
  and delayed, `leased`, `dead`), so no write path pays for it; its cursor is the
  `<score>:<id>` of the last message walked. A job filter walks past the other jobs'
  messages, at most `JOB_WALK` a call, rather than keep an index per job that every
  enqueue, lease and settle would write.
- Pauses are the SET `<prefix>paused` and the registry `<prefix>{workers}:*`: both span
  queues, so on Redis Cluster each is in a slot of its own (the registry's three keys
  share theirs), away from the queues'.
- A queue's job stats are per-minute HASHes `js:<minute>` under its hash tag, each
  expiring a day after its minute: they prune themselves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from tasuki.backends.redis import codec, operating
from tasuki.backends.redis.cancelling import CANCELLED_WINDOW
from tasuki.backends.redis.codec import ms, us
from tasuki.backends.redis.plumbing import CHUNK, Plumbing
from tasuki.core.console import (
    MINUTE,
    STATS_KEPT,
    WORKER_KEPT,
    BrowseState,
    JobStats,
    JobTally,
    Listed,
    Page,
    WorkerInfo,
    check_limit,
    job_stats,
)
from tasuki.core.message import CONTENT_TYPE_HEADER, JOB_HEADER
from tasuki.errors import InvalidArgument

# At most this many messages walked by one browse call that filters by job.
JOB_WALK = 2000
# ... that filters by arguments (each one's body decoded in the script: about 5 µs of
# Redis's time a message).
MATCH_WALK = 1000


def match_rules(match: Mapping[str, Any]) -> list[list[Any]]:
    """The keys of `match` that browse.lua can compare as `app/console.matching` does:
    [key, want, positional index or -1] for each text or number (not 0 or 1, which
    Python finds equal to False and True, not a bool, finite); other wants are left to
    the caller's check."""
    rules: list[list[Any]] = []
    for key, want in match.items():
        if isinstance(want, bool) or not isinstance(want, str | int | float):
            continue
        if not isinstance(want, str) and (want in (0, 1) or not math.isfinite(want)):
            continue
        rules.append([key, want, int(key) if key.isdigit() else -1])
    return rules


# -- pause ------------------------------------------------------------------------------
def pause(redis: Plumbing, queue: str) -> None:
    redis.keys.queue(queue)  # the name checked as any queue's
    redis.command("SADD", redis.keys.paused, queue)


def resume(redis: Plumbing, queue: str) -> None:
    redis.command("SREM", redis.keys.paused, queue)


def paused(redis: Plumbing) -> set[str]:
    """One SMEMBERS: what every worker reads once a second."""
    return {_text(name) for name in redis.command("SMEMBERS", redis.keys.paused)}


# -- browsing ---------------------------------------------------------------------------
def browse(
    redis: Plumbing,
    queue: str,
    state: BrowseState,
    job: str | None,
    newest_first: bool,
    limit: int,
    cursor: str | None,
    rules: Sequence[Sequence[Any]] = (),
) -> Page[Listed]:
    """A page of the listing; with `rules` (`match_rules`), of the messages whose
    arguments may match, filtered in the script as it walks (at most MATCH_WALK a call,
    else JOB_WALK with a job filter)."""
    check_limit(limit)
    _check_cursor(cursor)
    keys = redis.keys.queue(queue)
    args = [
        keys.base,
        state,
        "1" if newest_first else "0",
        limit,
        cursor or "",
        job or "",
        JOB_HEADER,
        MATCH_WALK if rules else JOB_WALK,
        orjson.dumps(list(rules)).decode() if rules else "",
        CONTENT_TYPE_HEADER,
    ]
    reply = redis.eval("browse", [keys.waiting, keys.delayed, keys.leased, keys.dead], args)
    now = int(reply[0]) / 1e6
    items = list(codec.records(reply, codec.listed(queue, state, now), 2))
    return Page(items, _text(reply[1]) or None)


def _check_cursor(cursor: str | None) -> None:
    """A cursor is `<score>:<id>`, as browse.lua gives it."""
    if cursor is None:
        return
    score, sep, _ = cursor.partition(":")
    try:
        float(score)
    except ValueError:
        sep = ""
    if not sep:
        raise InvalidArgument(f"not a listing cursor: {cursor!r}")


def retry_many(redis: Plumbing, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
    """A dead letter that is a flow's step gets its flow's record among the script's keys
    (`operating.flow_records`), so the flow it failed runs again, as on a redrive."""
    keys = redis.keys.queue(queue)
    out: list[bool] = []
    for start in range(0, len(ids), CHUNK):
        part = list(ids[start : start + CHUNK])
        script_keys = [
            keys.waiting,
            keys.dead,
            keys.signal,
            keys.results,
            keys.limited,
            keys.delayed,
            keys.leased,
        ]
        records = operating.flow_records(redis, queue, part) if state == "dead" else []
        flows = list(dict.fromkeys(r for r in records if r))
        script_keys += flows
        args: list[object] = [keys.base, state, queue]
        for n, id in enumerate(part):
            record = records[n] if records else ""
            args += (id, flows.index(record) + 8 if record else 0)
        out.extend(r == 1 for r in redis.eval("retry_many", script_keys, args))
    return out


def cancel_many(redis: Plumbing, queue: str, ids: Sequence[str], state: BrowseState) -> list[bool]:
    keys = redis.keys.queue(queue)
    script_keys = [
        keys.waiting,
        keys.leased,
        keys.leases,
        keys.delayed,
        keys.keep,
        keys.results,
        keys.waiters,
        keys.limited,
        keys.dead,
    ]
    window = ms(CANCELLED_WINDOW)
    out: list[bool] = []
    for start in range(0, len(ids), CHUNK):
        part = list(ids[start : start + CHUNK])
        reply = redis.eval("cancel_many", script_keys, [keys.base, state, window, *part])
        out.extend(r == 1 for r in reply)
    return out


# -- workers and job stats ----------------------------------------------------------------
def announce(redis: Plumbing, info: WorkerInfo, tallies: Sequence[JobTally]) -> bool:
    """The registry's script, then one `add_tallies.lua` call per queue tallied."""
    registry = list(redis.keys.workers)
    stop = redis.eval("announce", registry, [info.id, info.to_json(), us(WORKER_KEPT)])
    by_queue: dict[str, list[JobTally]] = {}
    for tally in tallies:
        by_queue.setdefault(tally.queue, []).append(tally)
    for queue, part in by_queue.items():
        keys = redis.keys.queue(queue)
        args: list[object] = [keys.base, ms(STATS_KEPT + MINUTE)]
        for t in part:
            args += (int(t.minute), t.job, len(t.counts))
            for name, n in t.counts.items():
                args += (name, n)
        redis.eval("add_tallies", [keys.counts], args)
    return bool(stop == 1)


def workers(redis: Plumbing) -> list[WorkerInfo]:
    reply = redis.eval("workers", list(redis.keys.workers), [us(WORKER_KEPT), ""])
    now = int(reply[0]) / 1e6
    found = [
        WorkerInfo.from_json(info, int(seen_us) / 1e6, now)
        for _, seen_us, info in codec.records(reply, codec.worker, 1)
    ]
    return sorted(found, key=lambda w: w.id)


def stop_worker(redis: Plumbing, id: str) -> bool:
    return bool(redis.eval("workers", list(redis.keys.workers), [us(WORKER_KEPT), id]) == 1)


def read_job_stats(redis: Plumbing, queue: str, window: float, now: float) -> dict[str, JobStats]:
    """The minutes that ended after `now - window`, up to the current one."""
    keys = redis.keys.queue(queue)
    since = now - window
    first = int(since - since % MINUTE)
    last = int(now - now % MINUTE)
    reply = redis.eval("job_stats", [keys.counts], [keys.base, first, last])
    sums: dict[str, dict[str, int]] = {}
    for field, amount in codec.records(reply, codec.total):
        job, name = field
        sums.setdefault(job, {})[name] = amount
    return job_stats(sums)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
