"""The systems under test. Each has an app module (what its worker imports) and a runner
(what the harness drives), side by side in this package.

Runners are imported by name only when their system runs, so a peer that failed to
install is reported as failed without stopping the others.

Every worker under test imports its app module from this package, so this file imports
nothing: the harness's own needs (redis-py, asyncio) must not load into, and slow the
start of, the workers being timed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks.peers.base import Context, Peer

#: name -> "module:class", in the order of the table
SYSTEMS: dict[str, str] = {
    "tasuki-redis": "benchmarks.peers.tasuki_runner:TasukiRedis",
    "celery": "benchmarks.peers.celery_runner:CeleryPeer",
    "dramatiq": "benchmarks.peers.dramatiq_runner:DramatiqPeer",
    "rq": "benchmarks.peers.rq_runner:RQPeer",
    "arq": "benchmarks.peers.arq_runner:ArqPeer",
    "huey": "benchmarks.peers.huey_runner:HueyPeer",
    "taskiq": "benchmarks.peers.taskiq_runner:TaskiqPeer",
    "saq": "benchmarks.peers.saq_runner:SaqPeer",
    "tasuki-sqlite": "benchmarks.peers.tasuki_runner:TasukiSQLite",
    "raw-redis": "benchmarks.peers.raw_runner:RawPeer",
    # the PostgreSQL section (`python -m benchmarks postgres`)
    "tasuki-postgres": "benchmarks.peers.tasuki_runner:TasukiPostgres",
    "procrastinate": "benchmarks.peers.procrastinate_runner:ProcrastinatePeer",
    "pgqueuer": "benchmarks.peers.pgqueuer_runner:PgQueuerPeer",
    "chancy": "benchmarks.peers.chancy_runner:ChancyPeer",
    "oban-py": "benchmarks.peers.unported:ObanPy",
    "tasuki-postgres-io": "benchmarks.peers.tasuki_runner:TasukiPostgresIO",
    "pgqueuer-io": "benchmarks.peers.pgqueuer_runner:PgQueuerIO",
    # variants, run only when named with --only
    "rq-fork": "benchmarks.peers.rq_runner:RQForkPeer",
    "taskiq-list": "benchmarks.peers.taskiq_runner:TaskiqListPeer",
}
POSTGRES = [
    "tasuki-postgres",
    "procrastinate",
    "pgqueuer",
    "chancy",
    "oban-py",
    "tasuki-postgres-io",
    "pgqueuer-io",
]
DEFAULT = [name for name in SYSTEMS if name not in {"rq-fork", "taskiq-list", *POSTGRES}]
#: the sections of `python -m benchmarks [SECTION]`: their systems and reference
SECTIONS = {"redis": (DEFAULT, "tasuki-redis"), "postgres": (POSTGRES, "tasuki-postgres")}


def load(name: str, ctx: Context) -> Peer:
    """Import and construct one system's runner (raises on a missing package)."""
    module_name, cls_name = SYSTEMS[name].split(":")
    cls: type[Peer] = getattr(importlib.import_module(module_name), cls_name)
    return cls(ctx)


__all__ = ["DEFAULT", "POSTGRES", "SECTIONS", "SYSTEMS", "load"]
