"""`tasuki enqueue JOB [ARG...]`: put one job message on a queue from the shell."""

from __future__ import annotations

import difflib
from typing import Any

import click
import orjson

from tasuki.app import App
from tasuki.cli.common import (
    MESSAGE_ID,
    QUEUE,
    app_from_options,
    app_options,
    friendly_errors,
)
from tasuki.core.job import Job, check_delay, check_message_id
from tasuki.core.message import JOB_HEADER, new_id
from tasuki.core.policies import UNSTATED_MAX_ATTEMPTS
from tasuki.errors import UnknownJob
from tasuki.middleware.base import Outgoing


def _parse(value: str) -> Any:
    """Arguments are JSON when they parse as JSON, else plain strings."""
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


def _job_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not value.strip():
        raise click.BadParameter("a job name cannot be empty", ctx, param)
    return value


def _kwargs(ctx: click.Context, param: click.Parameter, value: str | None) -> dict[str, Any]:
    if value is None:
        return {}
    try:
        kwargs = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON ({exc}): {value!r}", ctx, param) from None
    if not isinstance(kwargs, dict):
        raise click.BadParameter(f"must be a JSON object, got {value!r}", ctx, param)
    return kwargs


@click.command()
@click.argument("job", callback=_job_name)
@click.argument("args", nargs=-1)
@click.option(
    "--kwargs",
    "kwargs",
    callback=_kwargs,
    metavar="JSON",
    help="Keyword arguments as a JSON object.",
)
@click.option(
    "-q",
    "--queue",
    type=QUEUE,
    help="Queue (default: the job's queue with --app, else 'default').",
)
@click.option(
    "--delay",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="Seconds before it becomes ready.",
)
@click.option(
    "--id", "message_id", type=MESSAGE_ID, help="Message id (makes the enqueue idempotent)."
)
@click.option(
    "--priority",
    type=click.IntRange(0, 9),
    help="0 (lowest) to 9 (default: the job's with --app, else 0).",
)
@app_options
@friendly_errors
def enqueue(
    job: str,
    args: tuple[str, ...],
    kwargs: dict[str, Any],
    queue: str | None,
    delay: float | None,
    message_id: str | None,
    priority: int | None,
    app_spec: str | None,
    url: str | None,
) -> None:
    """Enqueue JOB with ARGS (each parsed as JSON, else taken as a string)."""
    app = app_from_options(app_spec, url)
    values = tuple(_parse(a) for a in args)
    if app_spec:
        registered = _registered(app, job)
        bound = registered.options(
            queue=queue, delay=delay, message_id=message_id, priority=priority
        )
        click.echo(bound.enqueue(*values, **kwargs))
        return
    given = check_message_id(message_id) if message_id else None
    made = "" if given is not None else new_id()
    draft = Outgoing(
        queue=queue or app.default_queue,
        id=given or made,
        job=None,
        body=app.codec.encode_payload(job, values, kwargs),
        headers={JOB_HEADER: job, **app.codec.content_headers},
        delay=check_delay(delay),
        max_attempts=UNSTATED_MAX_ATTEMPTS,  # the worker applies the job's own policy
        keep_id=app.id_window if given else 0.0,
        made_id=made,
        priority=priority or 0,
    )
    click.echo(app.producer.enqueue_outgoing([draft])[0].id)
    click.echo(
        f"note: the job name {job!r} was not checked, and the message went to queue "
        f"{draft.queue!r} with no job's policies: give --app MODULE:APP (or TASUKI_APP) to "
        "check it and use the job's own queue, priority and policies",
        err=True,
    )


def _registered(app: App, name: str) -> Job[..., Any]:
    """The app's job of that name, or an error that names the likeliest one meant."""
    try:
        return app.get_job(name)
    except UnknownJob as exc:
        names = sorted(app.registry.jobs)
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        if close:
            raise UnknownJob(f"{exc}; did you mean {close[0]!r}?") from None
        if names and len(names) <= 10:
            raise UnknownJob(f"{exc}; its jobs: {', '.join(names)}") from None
        raise
