"""`tasuki retry QUEUE --all` and `tasuki cancel QUEUE --all`: act on every message a
filter matches (`app.retry_matching` / `app.cancel_matching`), after showing how many it
matches now and asking (`--yes` skips the question)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
import orjson

from tasuki.app import App, console
from tasuki.backends.urls import redact
from tasuki.core.console import BROWSE_STATES

F = TypeVar("F", bound=Callable[..., Any])


def match_value(text: str) -> Any:
    """`--match k=v`: v as JSON when it reads as JSON (42, true, "x"), else as text."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def matches(pairs: tuple[str, ...]) -> dict[str, Any]:
    match: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="'--match'")
        match[key] = match_value(value)
    return match


def bulk_options(default_state: str) -> Callable[[F], F]:
    """--all with its filter (--state, --job, --match) and --yes."""

    def decorate(fn: F) -> F:
        fn = click.option("--yes", is_flag=True, help="With --all: do not ask first.")(fn)
        fn = click.option(
            "--match",
            "pairs",
            multiple=True,
            metavar="KEY=VALUE",
            help="With --all: only messages whose argument KEY equals VALUE. Repeatable.",
        )(fn)
        fn = click.option("--job", help="With --all: only messages of this job.")(fn)
        fn = click.option(
            "--state",
            type=click.Choice(BROWSE_STATES),
            default=default_state,
            show_default=True,
            help="With --all: the state of the messages to act on.",
        )(fn)
        return click.option(
            "--all", "every", is_flag=True, help="Every message the filter matches."
        )(fn)

    return decorate


def run_bulk(
    app: App,
    verb: str,
    queue: str,
    state: str,
    job: str | None,
    match: dict[str, Any],
    yes: bool,
) -> None:
    """Count, ask, act; print what was changed."""
    count, more = console.count_matching(
        app.backend, app.codec, queue, state, job=job, match=match or None
    )
    what = f"{count}{'+' if more else ''} {state} message(s) of {queue!r} on {redact(app.url)}"
    if count == 0:
        click.echo(f"no {state} message of {queue!r} matches: nothing to {verb}")
        return
    if not yes:
        click.confirm(f"{verb} {what}?", abort=True)
    act = app.retry_matching if verb == "retry" else app.cancel_matching
    done = act(queue, state, job=job, match=match or None)
    click.echo(f"{'retried' if verb == 'retry' else 'cancelled'} {done} message(s)")
