"""tasuki on Redis and on SQLite: `job.enqueue`, `job.enqueue_many`, `app.stats`."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from benchmarks.peers.base import Context, SyncPeer, Unavailable, python_argv
from benchmarks.peers.tasuki_app import URL_ENV, build

#: worker threads (`-c`); chosen with `python -m benchmarks --sweep` (see README)
CONCURRENCY = {"redis": 256, "sqlite": 256, "postgres": 512}


class TasukiPeer(SyncPeer):
    package = "tasuki"
    has_bulk = True
    backend = "redis"

    def __init__(self, ctx: Context, concurrency: int | None = None) -> None:
        super().__init__(ctx)
        self.concurrency = concurrency or CONCURRENCY[self.backend]
        self.settings = (
            f"`tasuki worker -q default -c {self.concurrency} --no-scheduler`, "
            "sync job (runs on the fetcher thread once proven fast)"
        )
        self.url = self.backend_url()
        self.app, self.job = build(self.url)

    def backend_url(self) -> str:
        try:
            module = importlib.import_module("tasuki.backends.redis")
        except ImportError as exc:
            raise Unavailable(f"tasuki.backends.redis cannot be imported: {exc}") from exc
        if not hasattr(module, "from_url"):
            raise Unavailable("tasuki.backends.redis is not built yet (no from_url)")
        return self.ctx.redis_url

    def enqueue(self, i: int) -> None:
        self.job.enqueue(i)

    def enqueue_bulk(self, indices: Sequence[int]) -> None:
        self.job.enqueue_many([(i,) for i in indices])

    def worker_argv(self) -> list[str]:
        return python_argv(
            "-m", "tasuki", "worker", "benchmarks.peers.tasuki_app:app",
            "-q", "default", "-c", self.concurrency,
            "--log-level", "WARNING", "--no-scheduler",
        )  # fmt: skip

    def worker_env(self) -> dict[str, str]:
        return {URL_ENV: self.url}

    def pending(self) -> int:
        s = self.app.stats("default")
        return int(s["ready"] + s["in_flight"] + s["delayed"])

    def close(self) -> None:
        self.app.close()
        super().close()


class TasukiRedis(TasukiPeer):
    name = "tasuki-redis"
    title = "tasuki (Redis)"


class TasukiSQLite(TasukiPeer):
    name = "tasuki-sqlite"
    title = "tasuki (SQLite)"
    backend = "sqlite"

    def backend_url(self) -> str:
        self.settings += "; `sqlite:///<tmp>/bench.db` (default `synchronous=full`, WAL)"
        db = self.ctx.tmpdir / "bench.db"
        for suffix in ("", "-wal", "-shm"):
            db.with_name(db.name + suffix).unlink(missing_ok=True)
        return f"sqlite:///{db}"

    def reset(self) -> None:
        self.app.purge("default")


#: the PostgreSQL server the PostgreSQL section measures (every peer there uses it)
POSTGRES_ENV = "BENCH_POSTGRES_URL"
POSTGRES_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"
#: tasuki-postgres's schema on that server, and its tables emptied between measurements
SCHEMA = "tasuki_bench"
TABLES = (
    "tasuki_messages",
    "tasuki_finished",
    "tasuki_locks",
    "tasuki_history",
    "tasuki_counts",
    "tasuki_archive",
)


class TasukiPostgres(TasukiPeer):
    name = "tasuki-postgres"
    title = "tasuki (PostgreSQL)"
    backend = "postgres"

    def backend_url(self) -> str:
        base = postgres_url()
        self.settings += f"; `postgresql://…?schema={SCHEMA}` (server defaults)"
        return f"{base}{'&' if '?' in base else '?'}schema={SCHEMA}"

    def reset(self) -> None:
        """Fresh tables, the way the peers get theirs (`TRUNCATE`). Deleted rows would
        otherwise pile up from round to round wherever the server runs without
        autovacuum (as this machine's does), and every later lease would walk them."""
        import psycopg

        self.app.stats("default")  # the first use creates the schema
        tables = ", ".join(f"{SCHEMA}.{table}" for table in TABLES)
        with psycopg.connect(postgres_url(), autocommit=True) as conn:
            conn.execute(f"TRUNCATE {tables}")


class TasukiPostgresIO(TasukiPostgres):
    """The job does one round trip of I/O: `SELECT 1` on its worker thread's connection."""

    name = "tasuki-postgres-io"
    title = "tasuki (PostgreSQL), SELECT 1 job"

    def __init__(self, ctx: Context, concurrency: int | None = None) -> None:
        super().__init__(ctx, concurrency)
        self.job = self.app.jobs["select_one"]
        self.settings += (
            "; the job runs `SELECT 1` on a connection from a pool of 4 of the worker's own"
        )

    def worker_env(self) -> dict[str, str]:
        return {**super().worker_env(), POSTGRES_ENV: postgres_url()}


def postgres_url() -> str:
    import os

    return os.environ.get(POSTGRES_ENV, POSTGRES_DEFAULT)
