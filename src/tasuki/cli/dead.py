"""`tasuki dead list|show|redrive|purge`: look at dead letters and send them back."""

from __future__ import annotations

import datetime as dt

import click
import orjson
from rich.table import Table

from tasuki.backends.urls import redact
from tasuki.cli.common import app_from_options, app_options, console, friendly_errors
from tasuki.message import DeadLetter


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _as_dict(d: DeadLetter, *, full: bool) -> dict[str, object]:
    doc: dict[str, object] = {
        "id": d.id,
        "queue": d.queue,
        "job": d.job,
        "attempt": d.attempt,
        "reason": d.reason,
        "error": str(d.error) if d.error else None,
        "died_at": d.died_at,
        "enqueued_at": d.enqueued_at,
    }
    if full:
        doc["headers"] = dict(d.headers)
        doc["body"] = d.body.decode("utf-8", "backslashreplace")
        doc["traceback"] = d.error.traceback if d.error else None
    return doc


@click.group()
def dead() -> None:
    """Dead letters: messages that will not be retried, with their reason."""


@dead.command("list")
@click.argument("queue", default="default")
@app_options
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--offset", type=click.IntRange(min=0), default=0)
@click.option("--json", "as_json", is_flag=True)
@friendly_errors
def list_(
    queue: str, app_spec: str | None, url: str | None, limit: int, offset: int, as_json: bool
) -> None:
    """Most recent dead letters of QUEUE first."""
    app = app_from_options(app_spec, url)
    letters = app.dead_letters(queue, limit=limit, offset=offset)
    if as_json:
        click.echo(orjson.dumps([_as_dict(d, full=False) for d in letters]).decode())
        return
    table = Table(title=f"dead letters · {queue} · {app.stats(queue)['dead']} in all")
    for col in ("id", "job", "attempts", "died (UTC)", "reason", "last error"):
        table.add_column(col, overflow="fold")
    for d in letters:
        table.add_row(
            d.id, d.job or "-", str(d.attempt), _when(d.died_at), d.reason, str(d.error or "")
        )
    console.print(table)


@dead.command()
@click.argument("queue")
@click.argument("message_id")
@app_options
@friendly_errors
def show(queue: str, message_id: str, app_spec: str | None, url: str | None) -> None:
    """Everything about one dead letter, traceback included."""
    app = app_from_options(app_spec, url)
    letter = app.dead_letter(queue, message_id)
    if letter is None:
        raise click.ClickException(f"no dead letter {message_id!r} in queue {queue!r}")
    click.echo(orjson.dumps(_as_dict(letter, full=True), option=orjson.OPT_INDENT_2).decode())


@dead.command()
@click.argument("queue")
@click.argument("ids", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Re-drive every dead letter of QUEUE.")
@app_options
@friendly_errors
def redrive(
    queue: str, ids: tuple[str, ...], all_: bool, app_spec: str | None, url: str | None
) -> None:
    """Send dead letters back to QUEUE, attempts reset: the given IDS, or --all."""
    if bool(ids) == all_:
        raise click.UsageError("give message ids, or --all")
    app = app_from_options(app_spec, url)
    count = app.redrive(queue, None if all_ else list(ids))
    click.echo(f"re-drove {count} message(s) to {queue!r}")


@dead.command("purge")
@click.argument("queue")
@app_options
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@friendly_errors
def purge_dead(queue: str, app_spec: str | None, url: str | None, yes: bool) -> None:
    """Delete the dead letters of QUEUE (only them)."""
    app = app_from_options(app_spec, url)
    if not yes:
        click.confirm(f"Delete every dead letter of {queue!r} on {redact(app.url)}?", abort=True)
    click.echo(f"deleted {app.purge_dead(queue)} dead letter(s) from {queue!r}")
