"""The console from the command line (DESIGN §4d): `tasuki pause|resume QUEUE`,
`tasuki ls QUEUE`, `tasuki retry QUEUE ID`, `tasuki workers`, `tasuki jobs [QUEUE]`."""

from __future__ import annotations

import datetime as dt
import sys
import time

import click
import orjson

from tasuki.backends.urls import redact
from tasuki.cli.bulk import bulk_options, matches, run_bulk
from tasuki.cli.common import (
    MESSAGE_ID,
    QUEUE,
    app_from_options,
    app_options,
    friendly_errors,
)
from tasuki.cli.tables import Column, table
from tasuki.core.console import BROWSE_STATES
from tasuki.core.records import MessageInfo


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.1f}ms" if value < 1 else f"{value:.2f}s"


@click.command()
@click.argument("queue", type=QUEUE)
@app_options
@friendly_errors
def pause(queue: str, app_spec: str | None, url: str | None) -> None:
    """Hold QUEUE: within a second no worker leases from it; enqueue still works."""
    app = app_from_options(app_spec, url, existing=True)
    app.pause(queue)
    click.echo(f"paused {queue!r} on {redact(app.url)}")


@click.command()
@click.argument("queue", type=QUEUE)
@app_options
@friendly_errors
def resume(queue: str, app_spec: str | None, url: str | None) -> None:
    """Let workers lease from QUEUE again."""
    app = app_from_options(app_spec, url, existing=True)
    app.resume(queue)
    click.echo(f"resumed {queue!r} on {redact(app.url)}")


def _row(m: MessageInfo) -> list[str]:
    when = m.died_at if m.state == "dead" else m.lease_expires_at or m.visible_at
    if m.args is None or m.kwargs is None:
        arguments = "(not decoded)"
    else:
        parts = [orjson.dumps(a).decode() for a in m.args]
        parts += [f"{k}={orjson.dumps(v).decode()}" for k, v in m.kwargs.items()]
        arguments = ", ".join(parts)
    return [m.id, m.job or "-", str(m.attempt), _when(when), arguments]


@click.command("ls")
@click.argument("queue", type=QUEUE)
@click.option("--state", type=click.Choice(BROWSE_STATES), default="ready", show_default=True)
@click.option("--job", help="Only messages of this job.")
@click.option(
    "--match",
    "pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Only messages whose argument KEY (a keyword, or 0, 1, ... for positional ones) "
    "equals VALUE (read as JSON when it is JSON). Repeatable.",
)
@click.option("--newest", is_flag=True, help="Newest first.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--cursor", help="Continue a listing from where it stopped.")
@app_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly_errors
def ls(
    queue: str,
    state: str,
    job: str | None,
    pairs: tuple[str, ...],
    newest: bool,
    limit: int,
    cursor: str | None,
    app_spec: str | None,
    url: str | None,
    as_json: bool,
) -> None:
    """List QUEUE's messages in a state, oldest first, with their job and arguments."""
    app = app_from_options(app_spec, url, existing=True)
    page = app.messages(
        queue,
        state,
        job=job,
        match=matches(pairs) or None,
        newest_first=newest,
        limit=limit,
        cursor=cursor,
    )
    if as_json:
        doc = {"items": [m.as_dict() for m in page.items], "cursor": page.cursor}
        click.echo(orjson.dumps(doc).decode())
        return
    time_column = {"ready": "ready since", "delayed": "due", "in_flight": "lease until"}
    table(
        f"{state} messages of {queue!r}, {'newest' if newest else 'oldest'} first",
        [
            Column("id", whole=True),
            Column("job", whole=True),
            Column("attempt", whole=True, justify="right"),
            Column(f"{time_column.get(state, 'died')} (UTC)", whole=True),
            Column("arguments"),
        ],
        [_row(m) for m in page.items],
    )
    if page.cursor is not None:
        click.echo(f"more: --cursor {page.cursor}")


@click.command()
@click.argument("queue", type=QUEUE)
@click.argument("message_id", type=MESSAGE_ID, required=False)
@bulk_options("delayed")
@app_options
@friendly_errors
def retry(
    queue: str,
    message_id: str | None,
    every: bool,
    state: str,
    job: str | None,
    pairs: tuple[str, ...],
    yes: bool,
    app_spec: str | None,
    url: str | None,
) -> None:
    """Make a delayed (or retry-scheduled) message ready now; with --all, every message
    the filter matches (delayed: cut short; dead: re-driven), after its count.

    Exits with status 1 when the message is no longer delayed.
    """
    if every == (message_id is not None):
        raise click.UsageError("give a MESSAGE_ID or --all (with its filter), not both")
    app = app_from_options(app_spec, url, existing=True)
    if every:
        run_bulk(app, "retry", queue, state, job, matches(pairs), yes)
        return
    assert message_id is not None
    if app.retry_now(queue, message_id):
        click.echo(f"{message_id} in {queue}: ready now")
    else:
        click.echo(f"{message_id} in {queue}: not delayed (it ran, was cancelled, or is unknown)")
        sys.exit(1)


@click.command()
@app_options
@click.option("--stop", "stop_id", metavar="WORKER_ID", help="Ask this worker to drain and exit.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly_errors
def workers(app_spec: str | None, url: str | None, stop_id: str | None, as_json: bool) -> None:
    """The workers seen within a day, what each runs now, and which are gone."""
    app = app_from_options(app_spec, url, existing=True)
    if stop_id is not None:
        if not app.stop_worker(stop_id):
            raise click.ClickException(f"no worker {stop_id!r} is known")
        click.echo(f"asked {stop_id} to stop: it drains and exits at its next heartbeat")
        return
    found = app.workers()
    if as_json:
        click.echo(orjson.dumps([w.as_dict() for w in found]).decode())
        return
    now = time.time()
    table(
        f"workers · {redact(app.url)}",
        [
            Column("id", whole=True),
            Column("state", whole=True),
            Column("queues"),
            Column("running", whole=True, justify="right"),
            Column("seen", whole=True, justify="right"),
            Column("version", whole=True),
            Column("now running"),
        ],
        [
            [
                w.id,
                "gone" if w.gone else "alive",
                ", ".join(w.queues),
                f"{len(w.running)}/{w.concurrency}",
                f"{max(0.0, now - w.seen_at):.0f}s ago",
                w.version,
                ", ".join(f"{r.job} {r.message_id}" for r in w.running) or "-",
            ]
            for w in found
        ],
    )


@click.command()
@click.argument("queue", required=False, type=QUEUE)
@click.option(
    "--window",
    type=click.FloatRange(min=0, min_open=True),
    default=3600.0,
    show_default=True,
    metavar="SECONDS",
)
@app_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly_errors
def jobs(
    queue: str | None, window: float, app_spec: str | None, url: str | None, as_json: bool
) -> None:
    """Each job's outcomes and run times over the last window, per queue (all by default)."""
    app = app_from_options(app_spec, url, existing=True)
    names = [queue] if queue else app.queues() or [app.default_queue]
    per_queue = {q: app.job_stats(q, window) for q in names}
    if as_json:
        doc = {q: {j: s.as_dict() for j, s in by_job.items()} for q, by_job in per_queue.items()}
        click.echo(orjson.dumps(doc).decode())
        return
    table(
        f"jobs over the last {window:g}s · {redact(app.url)}",
        [Column("queue", whole=True), Column("job", whole=True)]
        + [
            Column(name, whole=True, justify="right")
            for name in ("succeeded", "failed", "retried", "dead", "p50", "p95", "p99")
        ],
        [
            [
                q,
                job,
                str(s.succeeded),
                str(s.failed),
                str(s.retried),
                str(s.dead),
                _seconds(s.p50),
                _seconds(s.p95),
                _seconds(s.p99),
            ]
            for q, by_job in per_queue.items()
            for job, s in by_job.items()
        ],
    )
