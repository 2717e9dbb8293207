"""`tasuki demo`: the whole product in under a minute, on an embedded SQLite file.

It enqueues a few hundred jobs of every kind of fate (fast ones, ones that fail and then
succeed, ones that always fail, a slow one kept alive by heartbeats, duplicates, poison
messages), runs a worker with a live view, and shows where every message ended up.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

import click
from rich.console import Group
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

import tasuki
from tasuki.cli.common import console, friendly_errors, text
from tasuki.cli.tables import Column, table
from tasuki.core.message import JOB_HEADER
from tasuki.middleware.base import ExecuteHook, Middleware

FAST, FLAKY, DOOMED, DUPLICATES = 300, 40, 5, 20


class _Tally(Middleware):
    """Counts outcomes for the live view (a user middleware, like any other)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.mutex = threading.Lock()

    def execute(self, ctx: tasuki.Context) -> ExecuteHook:
        outcome = yield
        with self.mutex:
            self.counts[outcome.action or ("failed" if outcome.error else "ack")] += 1


def build_app(url: str) -> tuple[tasuki.App, _Tally]:
    app = tasuki.App(url)
    tally = _Tally()
    app.middleware.insert_after("Logging", tally)

    @app.job(queue="demo")
    def resize(image_id: int) -> None:
        time.sleep(random.uniform(0.002, 0.02))

    @app.job(queue="demo", retry=tasuki.Retry(max_attempts=5, backoff=tasuki.constant(0.3)))
    def flaky_upload(n: int) -> None:
        if tasuki.current().attempt < 3:
            raise ConnectionError(
                f"upload {n}: connection reset (attempt {tasuki.current().attempt})"
            )

    @app.job(
        queue="demo",
        retry=tasuki.Retry(max_attempts=3, backoff=tasuki.constant(0.2), give_up_on=(KeyError,)),
    )
    def charge_card(n: int) -> None:
        if n % 2:
            raise KeyError(f"customer {n} does not exist")
        raise RuntimeError(f"payment gateway refused card {n}")

    @app.job(queue="demo", visibility_timeout=1.0)
    def nightly_report() -> None:
        ctx = tasuki.current()
        for _ in range(30):  # 3 s, three times its visibility timeout: heartbeats keep it
            if ctx.wait_for_stop(0.1):
                raise tasuki.Defer()

    return app, tally


@click.command()
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("tasuki-demo.db"),
    show_default=True,
    help="SQLite file to run on (its 'demo' queue is emptied first).",
)
@click.option(
    "--url",
    default=None,
    help="Run on this backend instead (any URL, e.g. redis://... or sqs://...); --db is ignored.",
)
@click.option("-c", "--concurrency", type=click.IntRange(min=1), default=16, show_default=True)
@friendly_errors
def demo(db: Path, url: str | None, concurrency: int) -> None:
    """An end-to-end run (embedded SQLite unless --url): retries, duplicates, poison, dead
    letters."""
    url = url or f"sqlite:///{db}"
    app, tally = build_app(url)
    app.purge("demo")
    jobs = app.jobs
    console.print(f"[bold]tasuki demo[/bold] on [cyan]{escape(url)}[/cyan]\n")

    jobs["resize"].enqueue_many([(i,) for i in range(FAST)])
    jobs["flaky_upload"].enqueue_many([(i,) for i in range(FLAKY)])
    jobs["charge_card"].enqueue_many([(i,) for i in range(DOOMED)])
    jobs["nightly_report"].enqueue()
    run = f"{int(time.time())}"  # finished ids are remembered for an hour: new ones per run
    ids = {
        jobs["resize"].options(message_id=f"order-{run}-{i % 10}").enqueue(i)
        for i in range(DUPLICATES)
    }
    app.send("demo", b'{"args": [1], "kwar', headers={JOB_HEADER: "resize"})
    app.send("demo", b'{"args": [], "kwargs": {}}', headers={JOB_HEADER: "no_such_job"})
    expected_messages = FAST + FLAKY + DOOMED + 1 + len(ids) + 2
    console.print(
        text(
            f"enqueued {expected_messages} messages: {FAST} fast jobs, {FLAKY} that fail twice "
            f"then succeed, {DOOMED} that always fail, 1 slow job (3 s, 1 s lease), "
            f"{DUPLICATES} enqueues that share {len(ids)} message ids (idempotent: "
            f"{len(ids)} messages), and 2 poison messages.\n"
        )
    )

    worker = app.worker(queues=["demo"], concurrency=concurrency, grace=5.0)
    runner = threading.Thread(target=worker.run, kwargs={"until_idle": True}, daemon=True)
    progress = Progress(
        TextColumn("[bold]messages settled"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    bar = progress.add_task("settled", total=expected_messages)
    started = time.monotonic()
    runner.start()
    with Live(console=console.real(), refresh_per_second=10) as live:
        while runner.is_alive():
            live.update(_view(app, tally, progress, bar))
            runner.join(0.1)
        live.update(_view(app, tally, progress, bar))
    elapsed = time.monotonic() - started

    console.print(text(f"\nworker went idle after {elapsed:.1f}s; where every message ended up:\n"))
    s = app.stats("demo")
    table(
        "queue 'demo'",
        [
            Column(name, whole=True, justify="right")
            for name in ("ready", "in flight", "delayed", "dead")
        ],
        [[str(s["ready"]), str(s["in_flight"]), str(s["delayed"]), str(s["dead"])]],
    )
    console.print()
    dead = app.dead_letters("demo", limit=20)
    table(
        f"dead letters ({len(dead)})",
        [
            Column("id", whole=True),
            Column("job", whole=True),
            Column("attempts", whole=True, justify="right"),
            Column("reason"),
            Column("last error"),
        ],
        [[d.id, d.job or "-", str(d.attempt), d.reason, str(d.error or "")] for d in dead],
    )
    console.print(text(f"\nlook closer:  tasuki dead list demo --url {url}"), soft_wrap=True)
    console.print(text(f"re-drive:     tasuki dead redrive demo --all --url {url}"), soft_wrap=True)


def _view(app: tasuki.App, tally: _Tally, progress: Progress, bar: object) -> Group:
    s = app.stats("demo")
    with tally.mutex:
        counts = dict(tally.counts)
    settled = counts.get("ack", 0) + s["dead"]
    progress.update(bar, completed=min(settled, progress.tasks[0].total or 0))  # type: ignore[arg-type]
    # One line of words that wraps between them in a narrow terminal.
    line = Text.assemble(
        (f"finished {counts.get('ack', 0)}", "green"),
        "   ",
        (f"retries scheduled {counts.get('retry', 0)}", "yellow"),
        "   ",
        (f"dead {s['dead']}", "red"),
        f"   ready {s['ready']}   in flight {s['in_flight']}   delayed {s['delayed']}",
    )
    return Group(progress, line)
