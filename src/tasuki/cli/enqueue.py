"""`tasuki enqueue JOB [ARG...]`: put one job message on a queue from the shell."""

from __future__ import annotations

from typing import Any

import click
import orjson

from tasuki.cli.common import app_from_options, app_options, friendly_errors
from tasuki.job import check_delay, check_message_id
from tasuki.message import JOB_HEADER, new_id
from tasuki.middleware.base import Outgoing


def _parse(value: str) -> Any:
    """Arguments are JSON when they parse as JSON, else plain strings."""
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


@click.command()
@click.argument("job")
@click.argument("args", nargs=-1)
@click.option("--kwargs", "kwargs_json", help="Keyword arguments as a JSON object.")
@click.option("-q", "--queue", help="Queue (default: the job's queue with --app, else 'default').")
@click.option("--delay", type=float, help="Seconds before it becomes ready.")
@click.option("--id", "message_id", help="Message id (makes the enqueue idempotent).")
@app_options
@friendly_errors
def enqueue(
    job: str,
    args: tuple[str, ...],
    kwargs_json: str | None,
    queue: str | None,
    delay: float | None,
    message_id: str | None,
    app_spec: str | None,
    url: str | None,
) -> None:
    """Enqueue JOB with ARGS (each parsed as JSON, else taken as a string)."""
    app = app_from_options(app_spec, url)
    try:
        kwargs = orjson.loads(kwargs_json) if kwargs_json else {}
    except orjson.JSONDecodeError as exc:
        raise click.BadParameter(f"--kwargs is not JSON: {exc}") from exc
    if not isinstance(kwargs, dict):
        raise click.BadParameter("--kwargs must be a JSON object")
    values = tuple(_parse(a) for a in args)
    if app_spec:
        registered = app.get_job(job)
        bound = registered.options(queue=queue, delay=delay, message_id=message_id)
        click.echo(bound.enqueue(*values, **kwargs))
        return
    given = check_message_id(message_id) if message_id else None
    draft = Outgoing(
        queue=queue or app.default_queue,
        id=given or new_id(),
        job=None,
        body=app.codec.encode_payload(job, values, kwargs),
        headers={JOB_HEADER: job, **app.codec.content_headers},
        delay=check_delay(delay),
        keep_id=app.id_window if given else 0.0,
        id_given=given is not None,
    )
    click.echo(app.enqueue_outgoing([draft])[0].id)
