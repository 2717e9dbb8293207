"""A/B of the Redis hot-path scripts (`lease`, and `ack` or `settle`) of several trees.

    .venv/bin/python -m benchmarks.redis_scripts_ab [--limits] NAME=TREE [NAME=TREE ...]

    git archive <commit> | tar -x -C /tmp/before
    .venv/bin/python -m benchmarks.redis_scripts_ab before=/tmp/before after=.

Each TREE is a checkout of tasuki (its `src/tasuki/backends/redis/lua`). One
redis-server of our own holds one queue per tree, filled with the same messages; the
trees' `lease` (100 messages) and ack (of those 100) scripts are then called in
rotation, so that whatever else the machine does weighs on all of them alike, and the
server times every call itself (SLOWLOG with a threshold of 0): what is printed is Redis
CPU per call, free of the client's and the network's noise. The ack is `settle.lua` with
every verdict an ack in a tree that has it, else `ack.lua`. A tree whose scripts take
fewer keys (before the queue's `counts` hash, or its `results`, `delayed`,
`waiters` and `limited` keys, existed) is called without them. With `--limits`, every
message carries a `ConcurrencyLimit(2)` of one of 1,000 keys (what admitting, holding
and freeing a slot cost), in trees that have limits.
"""

from __future__ import annotations

import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasuki.backends.base import Envelope, Limit
from tasuki.backends.luafiles import expand
from tasuki.backends.redis.backend import RedisBackend
from tasuki.backends.urls import backend_from_url
from tasuki.testing.servers import RedisServer

MESSAGES, BATCH, LIMIT_KEYS = 60_000, 100, 1000
_KEYS = re.compile(r"^-- KEYS\[(\d+)\]", re.MULTILINE)


def source(lua: Path, name: str) -> str:
    return expand(lambda *parts: lua.joinpath(*parts).read_text(), name)


def key_count(script: str) -> int:
    return max(int(n) for n in _KEYS.findall(script))


def main(trees: dict[str, Path], limits: bool = False) -> None:
    with RedisServer(Path(tempfile.mkdtemp())) as server:
        backend = backend_from_url(f"{server.url()}?prefix=ab:")
        assert isinstance(backend, RedisBackend)
        conn = backend.redis.connection()
        scripts = {}
        settles: dict[str, bool] = {}
        for name, root in trees.items():
            lua = root / "src" / "tasuki" / "backends" / "redis" / "lua"
            settles[name] = lua.joinpath("settle.lua").exists()
            lease, ack = source(lua, "lease"), source(lua, "settle" if settles[name] else "ack")
            scripts[name] = (
                conn.command("SCRIPT", "LOAD", lease).decode(),
                key_count(lease),
                conn.command("SCRIPT", "LOAD", ack).decode(),
                key_count(ack),
            )
        body = b'{"args": [12345], "kwargs": {}}'
        headers = {"tasuki-job": "bench.job", "tasuki-content-type": "json"}
        for name in trees:
            for start in range(0, MESSAGES, 1000):
                batch = range(start, start + 1000)
                backend.enqueue(
                    [
                        Envelope(
                            name,
                            f"m{i}",
                            body,
                            headers,
                            limits=(
                                (
                                    Limit(
                                        f"concurrency:{name}:job:{i % LIMIT_KEYS}", "concurrency", 2
                                    ),
                                )
                                if limits
                                else ()
                            ),
                        )
                        for i in batch
                    ]
                )
        conn.command("CONFIG", "SET", "slowlog-log-slower-than", "0")
        conn.command("CONFIG", "SET", "slowlog-max-len", "1000000")
        conn.command("SLOWLOG", "RESET")
        names = list(trees)
        for round_ in range(MESSAGES // BATCH):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                k = backend.keys.queue(name)
                lease_sha, lease_keys, ack_sha, ack_keys = scripts[name]
                keys = [k.waiting, k.leased, k.dead, k.leases, k.counts]
                keys = [*keys, k.results, k.delayed, k.waiters, k.limited][:lease_keys]
                nonce = os.urandom(6).hex()
                out = conn.command(
                    "EVALSHA", lease_sha, len(keys), *keys, k.base, BATCH, 30_000_000, nonce
                )
                args: list[object] = [k.base]
                if settles[name]:
                    args.append("a" * ((len(out) - 1) // 9))
                    keys = [k.waiting, k.leased, k.leases, k.dead, k.keep, k.counts, k.signal]
                    keys = [*keys, k.results, k.delayed, k.waiters, k.limited][:ack_keys]
                else:
                    keys = [k.leased, k.leases, k.keep, k.counts][:ack_keys]
                for i in range(1, len(out), 9):
                    args += [out[i], out[i + 6]]
                acked = conn.command("EVALSHA", ack_sha, len(keys), *keys, *args)
                assert len(acked) == BATCH and all(acked), name
        times: dict[str, list[int]] = {}
        for entry in conn.command("SLOWLOG", "GET", "-1"):
            call = entry[3]
            if call[0] == b"EVALSHA":
                times.setdefault(call[1].decode(), []).append(int(entry[2]))
        backend.close()
    for op, index in (("lease", 0), ("ack", 2)):
        for name in names:
            sha = scripts[name][index]
            calls = times[sha]
            twins = [n for n in names if n != name and scripts[n][index] == sha]
            print(
                f"{op:5} of {BATCH}  {name:14} median {statistics.median(calls):7.1f} µs"
                f"  mean {statistics.mean(calls):7.1f} µs  ({len(calls)} calls"
                + (f", the same script as {', '.join(twins)})" if twins else ")")
            )


if __name__ == "__main__":
    args = sys.argv[1:]
    with_limits = "--limits" in args
    pairs = [arg.split("=", 1) for arg in args if arg != "--limits"]
    if not pairs or any(len(p) != 2 for p in pairs):
        sys.exit(__doc__)
    main({name: Path(path).resolve() for name, path in pairs}, with_limits)
