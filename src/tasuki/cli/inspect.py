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
from tasuki.cli.tables import Column, record, table
from tasuki.core.flowrecords import ResultRecord
from tasuki.core.records import MessageInfo, Progress, StepRecord, preview


@click.command()
@click.argument("queue", type=QUEUE)
@click.argument("message_id", type=MESSAGE_ID)
@app_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly_errors
def inspect(
    queue: str, message_id: str, app_spec: str | None, url: str | None, as_json: bool
) -> None:
    """State, attempts, priority, lease, progress, result, recent history, durable steps
    and what it waits for, of one message.

    Exits with status 1 when the backend knows nothing of the message (never enqueued,
    or acked and its id no longer remembered) and keeps no result of it.
    """
    app = app_from_options(app_spec, url, existing=True)
    info = app.inspect(queue, message_id)
    kept = app.backend.result(queue, message_id) if app.backend.capabilities.results else None
    # The queue forgot a finished message's id before its result expired: the result
    # says what became of it, and the message has that one state.
    forgotten = info.state == "unknown" and kept is not None and kept.state != "pending"
    if as_json:
        doc = info.as_dict()
        if forgotten:
            doc["state"] = "finished"
        if kept is not None:
            doc["result"] = result_document(kept)
        click.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
    else:
        if forgotten:
            console.real().print(
                text(f"{info.id} in {info.queue}: finished (its id is no longer remembered)")
            )
        else:
            print_info(info)
        if kept is not None:
            print_result(kept)
    if info.state == "unknown" and kept is None:
        sys.exit(1)


def result_document(kept: ResultRecord) -> dict[str, object]:
    """The kept result as `inspect --json` shows it: the value decoded, or the error."""
    doc: dict[str, object] = {"state": kept.state, "expires_at": kept.expires_at}
    if kept.state == "ok":
        doc["value"] = orjson.loads(kept.value or b"null")
    elif kept.state == "failed":
        doc["error"] = str(kept.error)
        doc["reason"] = kept.reason
    return doc


def print_result(kept: ResultRecord) -> None:
    """The kept result, under the message (what `tasuki result` would answer)."""
    rows: list[tuple[str, str]] = [("state", kept.state)]
    if kept.state == "ok":
        rows.append(("value", (kept.value or b"null").decode(errors="replace")))
    elif kept.state == "failed":
        rows.append(("error", str(kept.error)))
    if kept.expires_at is not None:
        rows.append(("kept until", when(kept.expires_at)))
    out = console.real()
    out.print()
    record("result", rows, out=out)


def when(at: float | None, now: float | None = None) -> str:
    """An epoch time as local ISO time with how far it is from now."""
    if at is None:
        return "-"
    now = time.time() if now is None else now
    stamp = datetime.fromtimestamp(at).isoformat(sep=" ", timespec="seconds")
    delta = at - now
    relative = f"in {delta:.1f}s" if delta >= 0 else f"{-delta:.1f}s ago"
    return f"{stamp} ({relative})"


def progress_line(progress: Progress) -> str:
    """`40% 4 of 10 pages`: what a running job last said of its progress."""
    return f"{progress.fraction:.0%} {progress.text}".rstrip()


def _step_row(step: StepRecord, now: float) -> list[str]:
    name = f"{step.name} #{step.occurrence}"
    return [name, when(step.started_at, now), f"{step.duration:.3f}s", preview(step.result)]


def print_info(info: MessageInfo) -> None:
    now = time.time()
    out = console.real()
    if info.state == "unknown":
        out.print(
            text(
                f"{info.id} in {info.queue}: unknown (never enqueued, or finished and no "
                "longer remembered)"
            )
        )
        return
    rows: list[tuple[str, str]] = [("state", info.state.replace("_", " "))]
    if info.flow_id is not None:
        rows.append(("flow", f"{info.flow_id}, step {info.step} (tasuki flow {info.flow_id})"))
    if info.state in ("finished", "cancelled"):
        rows.append(("id remembered until", when(info.finished_until, now)))
    else:
        rows += [
            ("attempt", _attempts(info.attempt, info.max_attempts)),
            ("fencing number", str(info.fencing_token)),
            ("priority", str(info.priority)),
            ("enqueued", when(info.enqueued_at, now)),
        ]
        if info.progress is not None:
            rows.append(("progress", progress_line(info.progress)))
        if info.visible_at is not None:
            rows.append(("visible", when(info.visible_at, now)))
        if info.lease_expires_at is not None:
            rows.append(("lease expires", when(info.lease_expires_at, now)))
        if info.waiting:
            rows.append(("waiting", info.waiting))
        if info.state == "dead":
            rows += [("died", when(info.died_at, now)), ("reason", info.reason)]
            if info.error is not None:
                rows.append(("error", str(info.error)))
    record(f"{info.id} in queue {info.queue}", rows, out=out)
    if info.history:
        out.print()
        table(
            "recent leases, oldest first",
            [
                Column("ended", whole=True),
                Column("how", whole=True),
                Column("fencing number", whole=True, justify="right"),
                Column("detail"),
            ],
            [[when(e.at, now), e.event, str(e.fencing_token), e.detail] for e in info.history],
            out=out,
        )
    if info.steps:
        out.print()
        table(
            "durable steps, oldest first",
            [
                Column("step", whole=True),
                Column("started", whole=True),
                Column("took", whole=True, justify="right"),
                Column("result"),
            ],
            [_step_row(s, now) for s in info.steps],
            out=out,
        )
    if info.error is not None and info.error.traceback:
        out.print()
        out.print(text(info.error.traceback.rstrip()), soft_wrap=True)


def _attempts(attempt: int, limit: int | None) -> str:
    """`2 of 10`; where the backend cannot know the limit (SQS keeps it in the body the
    worker reads), the attempts alone."""
    return f"{attempt}" if limit is None else f"{attempt} of {limit}"
