"""`tasuki inspect QUEUE ID`: what happened to one message."""

from __future__ import annotations

import sys
import time
from datetime import datetime

import click
import orjson

from tasuki.cli.common import (
    MESSAGE_ID,
    QUEUE,
    app_from_options,
    app_options,
    console,
    friendly_errors,
    text,
)
from tasuki.core.records import MessageInfo


@click.command()
@click.argument("queue", type=QUEUE)
@click.argument("message_id", type=MESSAGE_ID)
@app_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly_errors
def inspect(
    queue: str, message_id: str, app_spec: str | None, url: str | None, as_json: bool
) -> None:
    """State, attempts, lease, fencing number and recent history of one message.

    Exits with status 1 when the backend knows nothing of the message (never enqueued,
    or acked and its id no longer remembered).
    """
    app = app_from_options(app_spec, url, existing=True)
    info = app.inspect(queue, message_id)
    if as_json:
        click.echo(orjson.dumps(info.as_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        print_info(info)
    if info.state == "unknown":
        sys.exit(1)


def when(at: float | None, now: float | None = None) -> str:
    """An epoch time as local ISO time with how far it is from now."""
    if at is None:
        return "-"
    now = time.time() if now is None else now
    stamp = datetime.fromtimestamp(at).isoformat(sep=" ", timespec="seconds")
    delta = at - now
    relative = f"in {delta:.1f}s" if delta >= 0 else f"{-delta:.1f}s ago"
    return f"{stamp} ({relative})"


def print_info(info: MessageInfo) -> None:
    from rich.table import Table

    now = time.time()
    if info.state == "unknown":
        console.print(
            text(
                f"{info.id} in {info.queue}: unknown (never enqueued, or finished and no "
                "longer remembered)"
            )
        )
        return
    table = Table(show_header=False, title=text(f"{info.queue} / {info.id}"))
    table.add_column("field", style="bold")
    table.add_column("value")
    rows: list[tuple[str, str]] = [("state", info.state.replace("_", " "))]
    if info.state == "finished":
        rows.append(("id remembered until", when(info.finished_until, now)))
    else:
        rows += [
            ("attempt", f"{info.attempt} of {info.max_attempts}"),
            ("fencing number", str(info.fencing_token)),
            ("enqueued", when(info.enqueued_at, now)),
        ]
        if info.visible_at is not None:
            rows.append(("visible", when(info.visible_at, now)))
        if info.lease_expires_at is not None:
            rows.append(("lease expires", when(info.lease_expires_at, now)))
        if info.state == "dead":
            rows += [("died", when(info.died_at, now)), ("reason", info.reason)]
            if info.error is not None:
                rows.append(("error", str(info.error)))
    for field, value in rows:
        table.add_row(field, text(value))
    console.print(table)
    if info.history:
        history = Table(title="recent leases, oldest first")
        for col in ("ended", "how", "fencing number", "detail"):
            history.add_column(col)
        for entry in info.history:
            history.add_row(
                text(when(entry.at, now)),
                text(entry.event),
                str(entry.fencing_token),
                text(entry.detail),
            )
        console.print(history)
    if info.error is not None and info.error.traceback:
        console.print(text(info.error.traceback.rstrip()))
