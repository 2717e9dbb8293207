"""`python -m benchmarks.browse` (`./dev bench browse`): a page of the console's listing at
a million messages deep, on SQLite and PostgreSQL.

Each store is filled with `--depth` ready messages of two jobs ("a" and "b", alternating;
made by the engine in one statement or transaction, ids as tasuki makes them), 1,000
delayed and 1,000 dead ones. Then each listing's page of 50 is timed (`app.messages`, the
median of `--calls`): ready oldest and newest first, a page deep into the listing (by
its cursor), ready of one job, delayed, dead, and a page filtered by an argument (which
reads up to `MATCH_READ_LIMIT` messages). The target: a page of 50 in 50 ms or less.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import tasuki
from tasuki.core.message import new_ids

PAGE = 50
SCHEMA = "tasuki_browse"
SIDE = 1_000  # delayed, and dead, messages
INSERT = """
INSERT INTO tasuki_messages
    (queue, id, body, headers, state, visible_at, enqueued_at, max_attempts, died_at)
VALUES ('default', ?, ?, ?, ?, ?, ?, 10, ?)
"""


def body(i: int) -> bytes:
    return b'{"args":[%d],"kwargs":{"customer":"c%d"}}' % (i, i % 1000)


def headers(i: int) -> str:
    return '{"tasuki-job":"%s"}' % ("a" if i % 2 == 0 else "b")


def fill_sqlite(path: str, depth: int) -> None:
    tasuki.App(f"sqlite:///{path}").close()  # the schema
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA cache_size = -262144")
    conn.execute("BEGIN IMMEDIATE")
    now = time.time()
    total = depth + 2 * SIDE
    for lo in range(0, total, 10_000):
        hi = min(lo + 10_000, total)
        rows = []
        for msg_id, i in zip(new_ids(hi - lo), range(lo, hi), strict=True):
            if i < depth:
                state, visible, died = 0, now - 3600 + i * 1e-6, None
            elif i < depth + SIDE:
                state, visible, died = 0, now + 3600 + i * 1e-6, None
            else:
                state, visible, died = 2, now, now - 3600 + i * 1e-6
            rows.append((msg_id, body(i), headers(i), state, visible, now, died))
        conn.executemany(INSERT, rows)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("ANALYZE")
    conn.close()


def with_schema(base: str, schema: str) -> str:
    return f"{base}{'&' if '?' in base else '?'}schema={schema}"


def fill_postgres(base: str, schema: str, depth: int) -> None:
    import psycopg

    app = tasuki.App(with_schema(base, schema))  # the schema
    app.purge("default")
    app.close()
    total = depth + 2 * SIDE
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {schema}.tasuki_messages"
            " (queue, id, body, headers, state, visible_at, enqueued_at, max_attempts, died_at)"
            " SELECT 'default', 'm' || i,"
            ' convert_to(\'{"args":[\' || i || \'],"kwargs":{"customer":"c\' || (i %% 1000)'
            " || '\"}}', 'UTF8'),"
            " '{\"tasuki-job\":\"' || CASE WHEN i %% 2 = 0 THEN 'a' ELSE 'b' END || '\"}',"
            " CASE WHEN i >= %(depth)s + %(side)s THEN 2 ELSE 0 END,"
            " CASE WHEN i < %(depth)s THEN %(now)s - 3600 + i * 1e-6"
            "      WHEN i < %(depth)s + %(side)s THEN %(now)s + 3600 + i * 1e-6"
            "      ELSE %(now)s END,"
            " %(now)s, 10,"
            " CASE WHEN i >= %(depth)s + %(side)s THEN %(now)s - 3600 + i * 1e-6 END"
            " FROM generate_series(0, %(total)s - 1) AS i",
            {"now": time.time(), "depth": depth, "side": SIDE, "total": total},
        )
        conn.execute(f"VACUUM ANALYZE {schema}.tasuki_messages")
        conn.execute("CHECKPOINT")


def median_ms(call: Callable[[], object], calls: int) -> float:
    call()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def measure(url: str, calls: int) -> dict[str, float]:
    app = tasuki.App(url)
    deep_cursor = None
    for _ in range(20):  # 1,000 messages in
        deep_cursor = app.messages("default", limit=PAGE, cursor=deep_cursor).cursor
    cases: dict[str, Callable[[], object]] = {
        "ready, oldest first": lambda: app.messages("default", limit=PAGE),
        "ready, newest first": lambda: app.messages("default", newest_first=True, limit=PAGE),
        "ready, 1,000 in (cursor)": lambda: app.messages("default", limit=PAGE, cursor=deep_cursor),
        "ready of job b": lambda: app.messages("default", job="b", limit=PAGE),
        "delayed": lambda: app.messages("default", "delayed", limit=PAGE),
        "dead, newest first": lambda: app.messages(
            "default", "dead", newest_first=True, limit=PAGE
        ),
        "match customer (reads <= 1,000)": lambda: app.messages(
            "default", match={"customer": "c7"}, limit=PAGE
        ),
    }
    out = {name: median_ms(call, calls) for name, call in cases.items()}
    for name, call in cases.items():
        page = call()
        assert page.items, name  # type: ignore[attr-defined]
    app.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--only", choices=("sqlite", "postgres"))
    args = parser.parse_args(argv)
    results: dict[str, dict[str, float]] = {}
    if args.only in (None, "sqlite"):
        with tempfile.TemporaryDirectory() as tmp:
            path = str(Path(tmp) / "browse.db")
            start = time.monotonic()
            fill_sqlite(path, args.depth)
            print(f"sqlite: filled in {time.monotonic() - start:.0f}s", flush=True)
            results["sqlite"] = measure(f"sqlite:///{path}", args.calls)
    if args.only in (None, "postgres"):
        from benchmarks.peers.tasuki_runner import postgres_url

        base = postgres_url()
        start = time.monotonic()
        fill_postgres(base, SCHEMA, args.depth)
        print(f"postgres: filled in {time.monotonic() - start:.0f}s", flush=True)
        results["postgres"] = measure(with_schema(base, SCHEMA), args.calls)
    print(f"\na page of {PAGE} at {args.depth:,} ready (+{SIDE:,} delayed, +{SIDE:,} dead),")
    print(f"median of {args.calls} calls, in ms (target <= 50 ms); {os.cpu_count()} cores")
    names = list(next(iter(results.values())))
    print(f"{'listing':34}" + "".join(f"{engine:>12}" for engine in results))
    for name in names:
        print(f"{name:34}" + "".join(f"{results[e][name]:12.2f}" for e in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
