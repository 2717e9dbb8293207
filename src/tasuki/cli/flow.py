"""`tasuki flow FLOW_ID`: a workflow's state, its steps, and where it failed."""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Any

import click
import orjson

from tasuki.cli.common import MESSAGE_ID, app_from_options, app_options, friendly_errors
from tasuki.core.flows import FlowState
from tasuki.errors import UnknownFlow

# The exit status of each state, as `tasuki result` answers (1 failed, 3 not yet).
EXIT = {"succeeded": 0, "failed": 1, "running": 3, "cancelled": 5}


@click.command()
@click.argument("flow_id", type=MESSAGE_ID)
@app_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly_errors
def flow(flow_id: str, app_spec: str | None, url: str | None, as_json: bool) -> None:
    """A workflow's state, result or first failure, and each step's state and attempt.

    Exits 0 if it succeeded, 1 if a step was dead-lettered, 3 while it runs, 4 if no
    flow has this id, 5 if it was cancelled.
    """
    app = app_from_options(app_spec, url, existing=True)
    try:
        state = app.flow(flow_id)
    except UnknownFlow as unknown:
        if as_json:
            click.echo(orjson.dumps({"id": flow_id, "state": "unknown"}).decode())
        else:
            click.echo(str(unknown), err=True)
        sys.exit(4)
    if as_json:
        click.echo(orjson.dumps(as_document(state), option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(render(state))
    sys.exit(EXIT[state.state])


def as_document(state: FlowState) -> dict[str, Any]:
    return {
        "id": state.id,
        "state": state.state,
        "result": state.result,
        "error": None if state.error is None else asdict(state.error),
        "steps": [step._asdict() for step in state.steps],
    }


def render(state: FlowState) -> str:
    """The flow for a person: a head line, the failure with its traceback, the steps."""
    lines = [f"flow {state.id}: {state.state}"]
    if state.state == "succeeded":
        lines.append(f"result: {orjson.dumps(state.result).decode()}")
    failure = state.error
    if failure is not None:
        error = failure.error
        what = f"{error.type}: {error.message}" if error.message else error.type or "-"
        lines.append(
            f"failed at step {failure.step} ({failure.job} on {failure.queue}, "
            f"{failure.message_id}): {what}"
        )
        if error.traceback:
            lines += ["  " + line for line in error.traceback.rstrip().splitlines()]
    header = ("job", "queue", "message id", "state", "attempt")
    rows = [header, *[(s.job, s.queue, s.message_id, s.state, str(s.attempt)) for s in state.steps]]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines.append("")
    lines += [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return "\n".join(lines)
