"""`tasuki cancel QUEUE ID`: cancel one message, waiting or running."""

from __future__ import annotations

import sys

import click
import orjson

from tasuki.cli.bulk import bulk_options, matches, run_bulk
from tasuki.cli.common import MESSAGE_ID, QUEUE, app_from_options, app_options, friendly_errors

# What each answer of `app.cancel` means for the operator who asked.
MEANING = {
    "removed": "removed: it was waiting and will not run",
    "signalled": (
        "signalled: it is running; its job learns it at its next heartbeat, nothing of "
        "that run is kept and it is not retried"
    ),
    "unknown": "nothing to cancel: finished, dead, already cancelled, or never enqueued",
}


@click.command()
@click.argument("queue", type=QUEUE)
@click.argument("message_id", type=MESSAGE_ID, required=False)
@bulk_options("ready")
@app_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON (one message).")
@friendly_errors
def cancel(
    queue: str,
    message_id: str | None,
    every: bool,
    state: str,
    job: str | None,
    pairs: tuple[str, ...],
    yes: bool,
    app_spec: str | None,
    url: str | None,
    as_json: bool,
) -> None:
    """Cancel a message: removed if it waits, signalled if it runs; with --all, every
    message the filter matches (a dead one: removed), after its count.

    Exits with status 1 when there was nothing to cancel.
    """
    if every == (message_id is not None):
        raise click.UsageError("give a MESSAGE_ID or --all (with its filter), not both")
    app = app_from_options(app_spec, url, existing=True)
    if every:
        run_bulk(app, "cancel", queue, state, job, matches(pairs), yes)
        return
    assert message_id is not None
    status = app.cancel(queue, message_id)
    if as_json:
        click.echo(orjson.dumps({"queue": queue, "id": message_id, "status": status}).decode())
    else:
        click.echo(f"{message_id} in {queue}: {MEANING[status]}")
    if status == "unknown":
        sys.exit(1)
