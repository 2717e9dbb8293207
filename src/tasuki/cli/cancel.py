"""`tasuki cancel QUEUE ID`: cancel one message, waiting or running."""

from __future__ import annotations

import sys

import click
import orjson

from tasuki.cli.common import app_from_options, message_command

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
@message_command
def cancel(
    queue: str, message_id: str, app_spec: str | None, url: str | None, as_json: bool
) -> None:
    """Cancel a message: removed if it waits, signalled if it runs.

    Exits with status 1 when there was nothing to cancel.
    """
    app = app_from_options(app_spec, url, existing=True)
    status = app.cancel(queue, message_id)
    if as_json:
        click.echo(orjson.dumps({"queue": queue, "id": message_id, "status": status}).decode())
    else:
        click.echo(f"{message_id} in {queue}: {MEANING[status]}")
    if status == "unknown":
        sys.exit(1)
