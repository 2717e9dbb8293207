"""What every command shares: finding the app or the backend, printing, errors."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tasuki.app import App
from tasuki.errors import TasukiError

if TYPE_CHECKING:
    from rich.console import Console


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
err_console = _LazyConsole(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


def load_app(spec: str) -> App:
    """`package.module:attribute` (attribute defaults to `app`) -> the App in it."""
    module_name, _, attr = spec.partition(":")
    attr = attr or "app"
    if not module_name:
        raise click.BadParameter(f"expected module:app, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(f"cannot import {module_name!r}: {exc}") from exc
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise click.BadParameter(f"{module_name!r} has no attribute {attr!r}") from None
    if callable(target) and not isinstance(target, App):
        target = target()
    if not isinstance(target, App):
        raise click.BadParameter(f"{spec!r} is a {type(target).__name__}, not a tasuki.App")
    return target


def app_from_options(app_spec: str | None, url: str | None) -> App:
    if app_spec:
        app = load_app(app_spec)
        if url and url != app.url:
            raise click.BadParameter("give --app or --url, not both")
        return app
    return App(url)


def app_options(fn: F) -> F:
    """--app module:app / --url URL, shared by the operating commands."""
    fn = click.option(
        "--url",
        envvar="TASUKI_URL",
        help="Backend URL (default: $TASUKI_URL, else sqlite:///tasuki.db).",
    )(fn)
    fn = click.option("--app", "app_spec", metavar="MODULE:APP", help="Load the app from here.")(fn)
    return fn


def friendly_errors(fn: F) -> F:
    """A TasukiError becomes one red line and exit status 1, not a traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TasukiError as exc:
            err_console.print(f"[red]error:[/red] {exc}", highlight=False)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]
