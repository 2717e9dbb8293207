"""`python -m benchmarks.postgres_sizes`: table and index sizes around a million jobs.

Fills 1,000,000 waiting jobs (generate_series, server-side), then leases and acks every
one of them in batches of 256 through the backend (what a worker does, without running
jobs), and prints the sizes of `tasuki_messages` and its indexes: with the million
waiting, right after they were all processed, after a plain `VACUUM`, and after a second
million went through the vacuumed table.
"""

from __future__ import annotations

import argparse
import sys
import time

import psycopg

from benchmarks.peers.tasuki_runner import postgres_url
from tasuki.backends.base import Receipt
from tasuki.backends.postgres import PostgresBackend

SCHEMA = "tasuki_sizes"


def fill(conn: psycopg.Connection[tuple[object, ...]], count: int, tag: str) -> None:
    conn.execute(
        f"INSERT INTO {SCHEMA}.tasuki_messages"
        " (queue, id, body, headers, visible_at, enqueued_at, max_attempts)"
        " SELECT 'default', %(tag)s || i, convert_to('{\"args\":[' || i || '],\"kwargs\":{}}',"
        " 'UTF8'), '{\"tasuki-job\":\"noop\"}', %(now)s, %(now)s, 10"
        " FROM generate_series(1, %(count)s) AS i",
        {"now": time.time(), "count": count, "tag": tag},
    )


def process_all(backend: PostgresBackend) -> float:
    start, done = time.perf_counter(), 0
    while leased := backend.lease("default", 256, 60.0):
        backend.ack([Receipt(d.queue, d.id, d.token) for d in leased])
        done += len(leased)
    return done / (time.perf_counter() - start)


def sizes(conn: psycopg.Connection[tuple[object, ...]], label: str) -> None:
    rows = conn.execute(
        "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname LIKE 'tasuki_messages%%'"
        " AND c.relkind IN ('r', 'i') ORDER BY c.relkind DESC, 1",
        (SCHEMA,),
    ).fetchall()
    parts = ", ".join(f"{name} {int(size) / 2**20:,.1f} MiB" for name, size in rows)
    total = sum(int(size) for _, size in rows) / 2**20
    print(f"{label}: {parts}; total {total:,.1f} MiB", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.postgres_sizes", description=__doc__)
    p.add_argument("--jobs", type=int, default=1_000_000)
    args = p.parse_args(argv)
    base = postgres_url()
    backend = PostgresBackend(base, schema=SCHEMA)
    backend.migrate()
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {SCHEMA}.tasuki_messages")
        fill(conn, args.jobs, "a")
        conn.execute(f"ANALYZE {SCHEMA}.tasuki_messages")
        sizes(conn, f"{args.jobs:,} waiting")
        rate = process_all(backend)
        time.sleep(1)  # let the statistics collector catch up
        sizes(conn, f"all processed ({rate:,.0f}/s lease+ack in one thread)")
        conn.execute(f"VACUUM {SCHEMA}.tasuki_messages")
        sizes(conn, "after VACUUM")
        fill(conn, args.jobs, "b")
        rate = process_all(backend)
        time.sleep(1)
        sizes(conn, f"a second {args.jobs:,} processed ({rate:,.0f}/s)")
        backend.close()
        conn.execute(f"DROP SCHEMA {SCHEMA} CASCADE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
