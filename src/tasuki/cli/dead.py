"""`tasuki dead list|show|redrive|purge`: look at dead letters and send them back."""

from __future__ import annotations

import datetime as dt

import click
import orjson

from tasuki.backends.urls import redact
from tasuki.cli.common import (
    MESSAGE_ID,
    QUEUE,
    app_from_options,
    app_options,
    friendly_errors,
)
from tasuki.cli.tables import Column, record, table
from tasuki.core.message import DeadLetter


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


def _describe(d: DeadLetter) -> None:
    """A dead letter for a person: one field a line, then the body and the traceback as
    they are (a traceback reads as one only with its line breaks)."""
    fields = [
        ("queue", d.queue),
        ("job", d.job or "-"),
        ("attempts", str(d.attempt)),
        ("reason", d.reason),
        ("error", str(d.error) if d.error else "-"),
        ("enqueued", f"{_when(d.enqueued_at)} UTC"),
        ("died", f"{_when(d.died_at)} UTC"),
    ]
    record(f"dead letter {d.id}", fields)
    lines = ["  headers:"] if d.headers else []
    lines += [f"    {k}: {v}" for k, v in sorted(d.headers.items())]
    lines += ["", "body:", d.body.decode("utf-8", "backslashreplace")]
    if d.error and d.error.traceback:
        lines += ["", "traceback:", d.error.traceback.rstrip("\n")]
    click.echo("\n".join(lines))


@click.group()
def dead() -> None:
    """Dead letters: messages that will not be retried, with their reason."""


@dead.command("list")
@click.argument("queue", required=False, type=QUEUE)
@app_options
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--offset", type=click.IntRange(min=0), default=0)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly_errors
def list_(
    queue: str | None,
    app_spec: str | None,
    url: str | None,
    limit: int,
    offset: int,
    as_json: bool,
) -> None:
    """Most recent dead letters of QUEUE first; of every queue without one."""
    app = app_from_options(app_spec, url, existing=True)
    names = [queue] if queue else app.queues()
    if queue:
        letters = app.dead_letters(queue, limit=limit, offset=offset)
    else:  # newest first across queues: each queue's first offset + limit, merged
        merged = [d for q in names for d in app.dead_letters(q, limit=offset + limit)]
        merged.sort(key=lambda d: d.died_at, reverse=True)
        letters = merged[offset : offset + limit]
    if as_json:
        click.echo(orjson.dumps([_as_dict(d, full=False) for d in letters]).decode())
        return
    total = sum(int(app.stats(q)["dead"]) for q in names)
    where = f"of {queue!r}" if queue else "of every queue"
    columns = [Column("queue", whole=True)] if not queue else []
    table(
        f"dead letters {where}: {total} in all, newest first",
        [
            *columns,
            Column("id", whole=True),
            Column("job", whole=True),
            Column("attempts", whole=True, justify="right"),
            Column("died (UTC)", whole=True),
            Column("reason"),
            Column("error"),
        ],
        [
            [
                *([d.queue] if not queue else []),
                d.id,
                d.job or "-",
                str(d.attempt),
                _when(d.died_at),
                d.reason,
                str(d.error or "-"),
            ]
            for d in letters
        ],
    )


@dead.command()
@click.argument("queue", type=QUEUE)
@click.argument("message_id", type=MESSAGE_ID)
@app_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly_errors
def show(queue: str, message_id: str, app_spec: str | None, url: str | None, as_json: bool) -> None:
    """Everything about one dead letter, traceback included."""
    app = app_from_options(app_spec, url, existing=True)
    letter = app.dead_letter(queue, message_id)
    if letter is None:
        raise click.ClickException(f"no dead letter {message_id!r} in queue {queue!r}")
    if as_json:
        click.echo(orjson.dumps(_as_dict(letter, full=True), option=orjson.OPT_INDENT_2).decode())
    else:
        _describe(letter)


@dead.command()
@click.argument("queue", type=QUEUE)
@click.argument("ids", nargs=-1, type=MESSAGE_ID)
@click.option("--all", "all_", is_flag=True, help="Re-drive every dead letter of QUEUE.")
@app_options
@friendly_errors
def redrive(
    queue: str, ids: tuple[str, ...], all_: bool, app_spec: str | None, url: str | None
) -> None:
    """Send dead letters back to QUEUE, attempts reset: the given IDS, or --all.

    Exits with status 1, naming them, when some of the IDS are not dead letters of QUEUE
    (the others are re-driven).
    """
    if bool(ids) == all_:
        raise click.UsageError("give message ids, or --all")
    app = app_from_options(app_spec, url, existing=True)
    if all_:
        click.echo(f"re-drove {app.redrive(queue)} message(s) to {queue!r}")
        return
    wanted = list(dict.fromkeys(ids))
    missing = [i for i in wanted if app.dead_letter(queue, i) is None]
    found = [i for i in wanted if i not in missing]
    count = app.redrive(queue, found) if found else 0
    if found:
        click.echo(f"re-drove {count} message(s) to {queue!r}")
    if missing:
        which = ", ".join(repr(i) for i in missing)
        raise click.ClickException(f"no dead letter {which} in queue {queue!r}")


@dead.command("purge")
@click.argument("queue", type=QUEUE)
@app_options
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@friendly_errors
def purge_dead(queue: str, app_spec: str | None, url: str | None, yes: bool) -> None:
    """Delete the dead letters of QUEUE (only them)."""
    app = app_from_options(app_spec, url, existing=True)
    if not yes:
        click.confirm(f"Delete every dead letter of {queue!r} on {redact(app.url)}?", abort=True)
    click.echo(f"deleted {app.purge_dead(queue)} dead letter(s) from {queue!r}")
