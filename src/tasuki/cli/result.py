"""`tasuki result QUEUE ID`: the kept return value of one message, or why there is none."""

from __future__ import annotations

import sys

import click
import orjson

from tasuki.cli.common import app_from_options, message_command
from tasuki.errors import JobFailed, ResultMissing, ResultTimeout


@click.command()
@message_command
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Seconds to wait for a result that is not there yet.",
)
def result(
    queue: str,
    message_id: str,
    app_spec: str | None,
    url: str | None,
    as_json: bool,
    timeout: float,
) -> None:
    """Print a message's result (its job keeps it: keep_result=) as JSON.

    Exits 0 with the value, 1 if the message failed (dead-lettered), 3 if it has no
    result yet within --timeout, 4 if no result will come (unknown id, not kept,
    expired).
    """
    app = app_from_options(app_spec, url, existing=True)
    try:
        value = app.result(queue, message_id, timeout=timeout)
    except JobFailed as failed:
        _answer(as_json, queue, message_id, "failed", str(failed), 1)
    except ResultTimeout as waiting:
        _answer(as_json, queue, message_id, "pending", str(waiting), 3)
    except ResultMissing as missing:
        _answer(as_json, queue, message_id, "missing", str(missing), 4)
    finally:
        # Closed here, not left to the collector: run in-process (tests, scripts), a
        # PostgreSQL pool collected on its own worker thread raises in `__del__`.
        app.close()
    if as_json:
        doc = {"queue": queue, "id": message_id, "state": "ok", "value": value}
        click.echo(orjson.dumps(doc).decode())
    else:
        click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


def _answer(as_json: bool, queue: str, message_id: str, state: str, text: str, code: int) -> None:
    if as_json:
        doc = {"queue": queue, "id": message_id, "state": state, "detail": text}
        click.echo(orjson.dumps(doc).decode())
    else:
        click.echo(text, err=True)
    sys.exit(code)
