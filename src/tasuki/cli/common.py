"""What every command shares: finding the app or the backend, printing, errors."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tasuki.app import App
from tasuki.backends.urls import DEFAULT_URL, open_existing
from tasuki.cli.target import load_app, refuse_in_process
from tasuki.core.job import check_message_id, check_queue
from tasuki.errors import TasukiError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text


class _LazyConsole:
    """A rich Console made on first use, so a command that prints no tables (the
    worker) never imports rich."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def real(self) -> Console:
        """The Console itself, for rich APIs that need one (e.g. `Live`)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)


console = _LazyConsole()

F = TypeVar("F", bound=Callable[..., Any])


def text(value: object) -> Text:
    """`value` as rich shows it when it is data: as written, never read as markup.

    Rich reads `[...]` in a plain string as a style tag, so `tasuki[redis]`, a queue
    named `images[hd]` or a repr of a list would lose their brackets in a table.
    """
    from rich.text import Text

    return Text(str(value))


class QueueName(click.ParamType):  # type: ignore[type-arg]
    """A queue name, checked by the same rule as the library's (`check_queue`)."""

    name = "queue"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            return check_queue(value)
        except TasukiError as exc:
            self.fail(str(exc), param, ctx)


QUEUE = QueueName()


class MessageId(click.ParamType):  # type: ignore[type-arg]
    name = "id"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            return check_message_id(value)
        except TasukiError as exc:
            self.fail(str(exc), param, ctx)


MESSAGE_ID = MessageId()


def app_from_options(app_spec: str | None, url: str | None, *, existing: bool = False) -> App:
    """The app of --app, or one on the backend of --url ($TASUKI_URL, else the default).

    `existing=True` is for commands that only look at or clean up what is stored: the
    backend must already hold a store (`open_existing`), so a mistyped path or a wrong
    working directory is an error instead of a new, empty database reporting zeros.
    A backend that lives in one process (memory://) is refused: the command runs in a
    process of its own.
    """
    if url is not None and not url.strip():
        raise click.BadParameter("the backend URL is empty", param_hint="'--url'")
    if app_spec:
        app = load_app(app_spec, param_hint="'--app'")
        if url and url != app.url:
            raise click.BadParameter("give --app or --url, not both")
    elif not existing:
        app = App(url)
    else:
        resolved = url or os.environ.get("TASUKI_URL") or DEFAULT_URL
        app = App(resolved, backend=open_existing(resolved))
    refuse_in_process(app)
    return app


def app_options(fn: F) -> F:
    """--app module:app / --url URL, shared by the operating commands."""
    fn = click.option(
        "--url",
        envvar="TASUKI_URL",
        help="Backend URL (default: $TASUKI_URL, else sqlite:///tasuki.db).",
    )(fn)
    fn = click.option(
        "--app",
        "app_spec",
        envvar="TASUKI_APP",
        metavar="MODULE:APP",
        help="Load the app from here (default: $TASUKI_APP).",
    )(fn)
    return fn


def friendly_errors(fn: F) -> F:
    """A failure at run time becomes one line, `Error: ...`, and exit status 1.

    TasukiError is what the library raises for everything it can name (a bad URL, an
    unreachable server, an unknown job); OSError is what the system says (a directory
    that does not exist, a port in use). Anything else is a bug and keeps its traceback.
    Printed by click, not rich: a message is data, and its brackets stay as written.
    """

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (TasukiError, OSError) as exc:
            message = " ".join(str(exc).splitlines()) or type(exc).__name__
            raise click.ClickException(message) from exc

    return wrapper  # type: ignore[return-value]


def message_command(fn: F) -> F:
    """A command about one message: QUEUE and MESSAGE_ID, --app/--url, --json, and
    friendly errors (in that order of parameters: queue, message_id, app_spec, url,
    as_json)."""
    fn = friendly_errors(fn)
    fn = click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)
    fn = app_options(fn)
    fn = click.argument("message_id", type=MESSAGE_ID)(fn)
    return click.argument("queue", type=QUEUE)(fn)
