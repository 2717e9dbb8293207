"""`MODULE:APP` -> the App, with an answer for every wrong turn a new user takes.

A job, a module, a class or a missing name where an App was expected is a usage
mistake: one line that says what was found there and which App objects the module
does have. Code of the user's that raises (the module's import, an app factory) is
theirs to fix, so they get their own traceback, without tasuki's frames above it.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import traceback
from types import ModuleType, TracebackType
from typing import IO, Any

import click

import tasuki
from tasuki.app import App
from tasuki.core.job import Job
from tasuki.errors import TasukiError

# Frames in these are tasuki's, click's or the import system's, never the user's.
_INTERNAL = (
    *(os.path.dirname(m.__file__ or "") + os.sep for m in (tasuki, click, importlib)),
    "<frozen importlib",
)


class UserCodeFailed(click.ClickException):
    """The user's module or factory raised: their traceback, then one `Error:` line."""

    exit_code = 1

    def __init__(self, message: str, error: BaseException) -> None:
        super().__init__(message)
        self.error = error

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(user_traceback(self.error), err=True, nl=False)
        click.echo(f"Error: {self.format_message()}", err=True)


def user_traceback(error: BaseException) -> str:
    """The traceback from the first frame outside tasuki, click and importlib."""
    tb: TracebackType | None = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_INTERNAL):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb))


def _kind(value: object) -> str:
    """What a user would call `value`: 'a job', 'a module', 'a class', 'an int'."""
    if value is None:
        return "None"
    if isinstance(value, Job):
        return "a job"
    if isinstance(value, ModuleType):
        return "a module"
    if inspect.isclass(value):
        return "a class"
    if inspect.isroutine(value):
        return "a function"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _apps_in(module: ModuleType, module_name: str) -> str:
    found = [f"{module_name}:{n}" for n, v in vars(module).items() if isinstance(v, App)]
    if not found:
        return f"there is no tasuki.App in {module_name!r}"
    if len(found) == 1:
        return f"the App in {module_name!r} is {found[0]}"
    return f"the Apps in {module_name!r} are {', '.join(found)}"


def _import(module_name: str, spec: str, hint: str | None) -> ModuleType:
    if module_name.endswith(".py") or "/" in module_name or os.sep in module_name:
        dotted = module_name.removesuffix(".py").replace(os.sep, ".").replace("/", ".")
        raise click.BadParameter(
            f"{spec!r}: give a module name, not a file path (e.g. '{dotted}:app', run from "
            "the directory that holds it)",
            param_hint=hint,
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(f"{exc.name}.")):
            raise click.BadParameter(
                f"cannot import {module_name!r}: no module of that name in {os.getcwd()} "
                "or on the Python path",
                param_hint=hint,
            ) from None
        raise UserCodeFailed(f"importing {module_name!r} failed: {exc}", exc) from exc
    except TasukiError:
        raise  # a misconfigured App (a bad URL): tasuki's own one-line message says it
    except Exception as exc:
        raise UserCodeFailed(
            f"importing {module_name!r} failed: {type(exc).__name__}: {exc}", exc
        ) from exc


def load_app(spec: str, *, param_hint: str | None = None) -> App:
    """`package.module:attribute` (attribute defaults to `app`) -> the App in it.

    The attribute may also be a function taking no arguments that returns the App (an
    app factory).
    """
    module_name, _, attr = spec.partition(":")
    attr = attr or "app"
    if not module_name:
        raise click.BadParameter(f"expected module:app, got {spec!r}", param_hint=param_hint)
    module = _import(module_name, spec, param_hint)
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise click.BadParameter(
                f"{module_name!r} has no attribute {attr!r}; {_apps_in(module, module_name)}",
                param_hint=param_hint,
            ) from None
    if isinstance(target, App):
        return target
    where = f"{module_name}:{attr}"
    if inspect.isfunction(target) or inspect.ismethod(target):
        return _from_factory(target, where, module, module_name, param_hint)
    raise click.BadParameter(
        f"{where!r} is {_kind(target)}, not a tasuki.App; {_apps_in(module, module_name)}",
        param_hint=param_hint,
    )


def _from_factory(
    factory: Any, where: str, module: ModuleType, module_name: str, hint: str | None
) -> App:
    required = [
        p.name
        for p in inspect.signature(factory).parameters.values()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if required:
        raise click.BadParameter(
            f"{where!r} is a function that takes arguments ({', '.join(required)}), not a "
            f"tasuki.App or a factory of one; {_apps_in(module, module_name)}",
            param_hint=hint,
        )
    try:
        made = factory()
    except TasukiError:
        raise
    except Exception as exc:
        raise UserCodeFailed(
            f"the app factory {where!r} failed: {type(exc).__name__}: {exc}", exc
        ) from exc
    if not isinstance(made, App):
        raise click.BadParameter(
            f"{where!r} returned {_kind(made)}, not a tasuki.App; {_apps_in(module, module_name)}",
            param_hint=hint,
        )
    return made


def refuse_in_process(app: App) -> None:
    """A backend that lives in one process (memory://) cannot serve a command that runs
    in a process of its own: what it stores would vanish when the command exits, and
    what it reports is a store nobody else writes to."""
    if app.backend.capabilities.cross_process:
        return
    command = click.get_current_context().command_path
    refused = app.backend.refusal(
        "cross_process",
        f"serve `{command}` (it keeps its messages inside one process: the command would "
        "work on a store that vanishes when it exits and that no other process sees)",
        "use sqlite:///tasuki.db on one machine, or redis://, postgresql:// or sqs:// "
        "across machines (memory:// is for tests that enqueue and run a worker in the "
        "same process)",
    )
    raise click.UsageError(str(refused))
