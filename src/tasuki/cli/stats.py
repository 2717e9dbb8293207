"""`tasuki stats [QUEUE...]` and `tasuki purge QUEUE`."""

from __future__ import annotations

import time

import click
import orjson

from tasuki.backends.urls import redact
from tasuki.cli.common import QUEUE, app_from_options, app_options, friendly_errors
from tasuki.cli.tables import Column, table


@click.command()
@click.argument("queues", nargs=-1, type=QUEUE)
@app_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--watch",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Refresh every SECONDS.",
)
@friendly_errors
def stats(
    queues: tuple[str, ...],
    app_spec: str | None,
    url: str | None,
    as_json: bool,
    watch: float | None,
) -> None:
    """Ready, in-flight, delayed and dead messages per queue, the oldest ready age, and
    whether the queue is paused."""
    app = app_from_options(app_spec, url, existing=True)
    while True:
        names = list(queues) or app.queues() or [app.default_queue]
        held = app.paused() if app.backend.capabilities.pause else set()
        rows = {q: app.stats(q) for q in names}
        if as_json:
            doc = {q: {**s, "paused": q in held} for q, s in rows.items()}
            click.echo(orjson.dumps(doc).decode())
        else:
            columns = (
                [Column("queue", whole=True)]
                + [
                    Column(name, whole=True, justify="right")
                    for name in ("ready", "in flight", "delayed", "dead", "oldest ready")
                ]
                + [Column("paused", whole=True)]
            )
            table(
                f"tasuki · {redact(app.url)}",
                columns,
                [
                    [
                        q,
                        str(s["ready"]),
                        str(s["in_flight"]),
                        str(s["delayed"]),
                        str(s["dead"]),
                        f"{s['oldest_ready_age']:.1f}s",
                        "paused" if q in held else "-",
                    ]
                    for q, s in rows.items()
                ],
            )
        if not watch:
            return
        time.sleep(watch)


@click.command()
@click.argument("queue", type=QUEUE)
@app_options
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@friendly_errors
def purge(queue: str, app_spec: str | None, url: str | None, yes: bool) -> None:
    """Remove EVERY message of QUEUE: ready, delayed, in flight and dead."""
    app = app_from_options(app_spec, url, existing=True)
    if not yes:
        click.confirm(f"Remove every message of queue {queue!r} on {redact(app.url)}?", abort=True)
    click.echo(f"purged {app.purge(queue)} message(s) from {queue!r}")
