"""`python -m benchmarks.sql_priorities`: do priorities slow a deep SQL queue down?

On SQLite and PostgreSQL, a queue of 1,000,000 due no-op jobs is filled twice: all of
priority 0, and of priorities 0..9 at random (each row's head start priority x
`priority_aging`, as an enqueue writes it). First the lease's plan on the full queue is
printed and checked: a walk of the rank index in its order, no sort of the due rows.
Then one worker process (`tasuki worker`, the benchmark's concurrency) drains the first
50,000 of them by rank: with mixed priorities those are spread over the whole table, as
a real backlog's most urgent messages are. The jobs are numbered in the order the lease
should take them, so the drain measured is exactly that. Rounds alternate; the medians
are printed with their ratio (the target: mixed within 10 % of uniform), and the
worker's CPU time per job beside them (steadier than the rate on a busy machine).
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.drain import drain as run_worker
from benchmarks.marks import Marks
from benchmarks.peers.tasuki_app import build
from benchmarks.peers.tasuki_runner import CONCURRENCY, postgres_url
from tasuki.backends.base import Backend
from tasuki.backends.sqlite.dialect import Q
from tasuki.core.message import new_ids

AGING = Backend.priority_aging
PG_SCHEMA = "tasuki_priorities"
LEVELS = {"uniform": 1, "mixed": 10}

SQLITE_DEPTH = "INSERT INTO tasuki_depth (queue, waiting) VALUES ('default', ?)"

# The server makes the rows: priorities from a seeded random(), jobs numbered by rank.
PG_FILL = """
INSERT INTO {schema}.tasuki_messages
    (queue, id, body, headers, visible_at, enqueued_at, max_attempts, priority, head_start)
SELECT 'default', 'deep' || i,
       convert_to('{{"args":[' || (row_number() OVER (ORDER BY vis - hs, i) - 1)
                  || '],"kwargs":{{}}}}', 'UTF8'),
       '{{"tasuki-job":"noop"}}', vis, %(now)s, 10, p, hs
FROM (
    SELECT i, p, p * %(aging)s AS hs, %(now)s - 5 + i * 1e-6 AS vis
    FROM (SELECT i, floor(random() * %(levels)s)::smallint AS p
          FROM generate_series(0, %(count)s - 1) AS i) r
) x
"""


def sqlite_fill(path: str, count: int, levels: int) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(path + suffix).unlink(missing_ok=True)
    build(f"sqlite:///{path}")[0].close()  # the schema, as tasuki makes it
    rng = random.Random(42)
    now = time.time()
    prio = [rng.randrange(levels) for _ in range(count)]
    vis = [now - 5 + i * 1e-6 for i in range(count)]
    order = sorted(range(count), key=lambda i: (vis[i] - prio[i] * AGING, i))
    arg = [0] * count
    for rank, i in enumerate(order):
        arg[i] = rank
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA cache_size = -262144")
    conn.execute("BEGIN IMMEDIATE")
    ids = new_ids(count)
    conn.executemany(  # the statement an enqueue runs, which decides where a row lies
        Q["insert_message"],
        (
            {
                "queue": "default",
                "id": ids[i],
                "body": b'{"args":[%d],"kwargs":{}}' % arg[i],
                "headers": '{"tasuki-job":"noop"}',
                "now": vis[i],
                "delay": 0.0,
                "max_attempts": 10,
                "visibility_timeout": None,
                "keep_id": 0.0,
                "unique_key": None,
                "priority": prio[i],
                "head_start": prio[i] * AGING,
                "limits": None,
            }
            for i in range(count)
        ),
    )
    conn.execute(SQLITE_DEPTH, (count,))
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def sqlite_plan(path: str) -> str:
    conn = sqlite3.connect(path)
    params = {"queue": "default", "now": time.time(), "limit": 256, "nonce": "x"}
    rows = conn.execute("EXPLAIN QUERY PLAN " + Q["lease"], {**params, "visibility_timeout": 30})
    plan = "\n".join(row[3] for row in rows.fetchall())
    conn.close()
    if "USING INDEX tasuki_messages_rank" not in plan or "TEMP B-TREE" in plan:
        raise AssertionError(f"the lease does not walk the rank index:\n{plan}")
    return plan


def pg_url() -> str:
    base = postgres_url()
    return f"{base}{'&' if '?' in base else '?'}schema={PG_SCHEMA}"


def pg_fill(count: int, levels: int) -> None:
    app, _ = build(pg_url())  # migrated
    app.purge("default")
    app.close()
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        conn.execute("SELECT setseed(0.42)")
        params = {"now": time.time(), "aging": AGING, "levels": levels, "count": count}
        conn.execute(PG_FILL.format(schema=PG_SCHEMA).encode(), params)
        conn.execute(f"VACUUM ANALYZE {PG_SCHEMA}.tasuki_messages")
        conn.execute("CHECKPOINT")


def pg_plan() -> str:
    from tasuki.backends.postgres.dialect import Q

    params: dict[str, Any] = {
        "queue": "default",
        "now": time.time(),
        "limit": 256,
        "nonce": "x",
        "visibility_timeout": 30.0,
    }
    with psycopg.connect(postgres_url()) as conn:
        conn.execute(f"SET search_path TO {PG_SCHEMA}")
        rows = conn.execute(("EXPLAIN (ANALYZE) " + Q["lease"]).encode(), params).fetchall()
        conn.rollback()
    plan = "\n".join(row[0] for row in rows)
    picking = plan[plan.index("CTE due") : plan.index("CTE changed")]
    if "Index Scan using tasuki_messages_rank" not in picking or "Sort" in picking:
        raise AssertionError(f"the lease does not walk the rank index:\n{plan}")
    return picking


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sql_priorities", description=__doc__)
    p.add_argument("--engine", choices=("sqlite", "postgres", "both"), default="both")
    p.add_argument("--messages", type=int, default=50_000)
    p.add_argument("--deep", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dir", help="where the SQLite files go (default: a temporary one)")
    args = p.parse_args(argv)
    engines = ("sqlite", "postgres") if args.engine == "both" else (args.engine,)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        marks = Marks(str(Path(tmp) / "marks"), args.deep + 1)
        for engine in engines:
            rates: dict[str, list[float]] = {"uniform": [], "mixed": []}
            cpus: dict[str, list[float]] = {"uniform": [], "mixed": []}
            for rnd in range(args.rounds):
                for name in ("uniform", "mixed") if rnd % 2 == 0 else ("mixed", "uniform"):
                    if engine == "sqlite":
                        path = str(Path(tmp) / f"{name}.db")
                        sqlite_fill(path, args.deep, LEVELS[name])
                        plan = sqlite_plan(path)
                        url = f"sqlite:///{path}"
                    else:
                        pg_fill(args.deep, LEVELS[name])
                        plan = pg_plan()
                        url = pg_url()
                    if rnd == 0:
                        print(f"{engine} {name}, lease plan at {args.deep:,}:\n{plan}")
                    rate, cpu = run_worker(url, args.messages, marks, CONCURRENCY[engine])
                    rates[name].append(rate)
                    cpus[name].append(cpu)
                    load = os.getloadavg()[0]
                    print(
                        f"{engine} round {rnd + 1} {name}: {rate:,.0f} jobs/s, worker CPU"
                        f" {cpu * 1e6:.1f} µs/job (load {load:.1f})",
                        flush=True,
                    )
            uniform, mixed = statistics.median(rates["uniform"]), statistics.median(rates["mixed"])
            print(
                f"{engine} median: uniform {uniform:,.0f} jobs/s, mixed priorities "
                f"{mixed:,.0f} jobs/s ({mixed / uniform:.0%} of uniform); worker CPU "
                f"{statistics.median(cpus['uniform']) * 1e6:.1f} µs/job uniform, "
                f"{statistics.median(cpus['mixed']) * 1e6:.1f} µs/job mixed",
                flush=True,
            )
        marks.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
