"""`tasuki worker module:app -q a,b -c N --grace S [--workers N]`."""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

import click
from click.core import ParameterSource

from tasuki import logs
from tasuki.cli.common import friendly_errors
from tasuki.cli.target import load_app, refuse_in_process
from tasuki.runtime.cores import usable_cpus
from tasuki.runtime.health import STUCK_AFTER

CPYTHON_SLICE = 0.005  # sys.getswitchinterval() until someone changes it
# What a child of `--workers` does not get: the supervisor serves the ports.
SUPERVISOR_ONLY = frozenset(
    {"workers", "metrics_port", "metrics_host", "health_port", "health_host", "reload",
     "reload_dirs"}
)  # fmt: skip


class WorkerCount(click.ParamType):  # type: ignore[type-arg]
    """A number of worker processes (at least 1), or `auto`: one per CPU."""

    name = "N|auto"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        if str(value).strip().lower() == "auto":
            return usable_cpus()
        try:
            count = int(value)
        except ValueError:
            self.fail(f"{value!r} is neither a number of processes nor 'auto'", param, ctx)
        if count < 1:
            self.fail(f"{count} is not a number of processes (at least 1)", param, ctx)
        return count


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
@click.option("-q", "--queues", help="Comma-separated queues (default: every job's queue).")
@click.option("-c", "--concurrency", type=click.IntRange(min=1), default=8, show_default=True)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=25.0,
    show_default=True,
    help="Seconds running jobs get on SIGTERM before being released.",
)
@click.option(
    "-w",
    "--workers",
    type=WorkerCount(),
    default="1",
    show_default=True,
    help="Worker processes, under one supervisor that restarts them and passes signals "
    "on ('auto': one per CPU this process may use); each runs --concurrency jobs at once.",
)
@click.option("--processes", type=click.IntRange(min=1), help="Size of the process pool.")
@click.option("--no-scheduler", is_flag=True, help="Do not enqueue periodic jobs from here.")
@click.option(
    "--no-inline",
    is_flag=True,
    help="Run every sync job on the thread pool, even those fast enough to run on the "
    "fetcher's thread.",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
)
@click.option(
    "--log-format", type=click.Choice(["plain", "json"]), default="plain", show_default=True
)
@click.option(
    "--log-config",
    type=click.Path(exists=True, dir_okay=False),
    metavar="FILE",
    help="A logging configuration to apply instead: dictConfig JSON or YAML, or an ini "
    "file for fileConfig. Without it, logging the app configured at import is left as is.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(min=1, max=65535),
    help="Serve Prometheus metrics on this port (needs tasuki[metrics]).",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="Address for --metrics-port; 0.0.0.0 exposes it.",
)
@click.option(
    "--health-port",
    type=click.IntRange(min=1, max=65535),
    help="Serve /livez and /readyz on this port (also served on --metrics-port).",
)
@click.option(
    "--health-host",
    default="127.0.0.1",
    show_default=True,
    help="Address for --health-port; 0.0.0.0 for probes from outside (Kubernetes).",
)
@click.option(
    "--stuck-after",
    type=click.FloatRange(min=0, min_open=True),
    default=STUCK_AFTER,
    show_default=True,
    metavar="SECONDS",
    help="/livez fails when a loop of the worker has not turned for this long.",
)
@click.option(
    "--reload",
    is_flag=True,
    help="Development: restart the worker when a .py file under the working directory "
    "changes (needs tasuki[reload]); --grace defaults to 1 s then.",
)
@click.option(
    "--reload-dir",
    "reload_dirs",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    help="Watch this directory too (repeatable).",
)
@click.pass_context
@friendly_errors
def worker(
    ctx: click.Context,
    app_spec: str,
    queues: str | None,
    concurrency: int,
    grace: float,
    workers: int,
    processes: int | None,
    no_scheduler: bool,
    no_inline: bool,
    log_level: str,
    log_format: str,
    log_config: str | None,
    metrics_port: int | None,
    metrics_host: str,
    health_port: int | None,
    health_host: str,
    stuck_after: float,
    reload: bool,
    reload_dirs: tuple[str, ...],
) -> None:
    """Run a worker for the app's jobs until SIGTERM/SIGINT (graceful), or a second one.

    Every option may come from the environment instead: TASUKI_ and the option's name
    (TASUKI_CONCURRENCY=16, TASUKI_QUEUES=a,b, TASUKI_NO_INLINE=1), MODULE:APP from
    TASUKI_APP; an option on the command line wins.
    """
    from tasuki.runtime.supervised import Supervised, serve_child_endpoints

    supervised = Supervised.from_env()
    index = None if supervised is None else supervised.index
    if (
        supervised is not None
        and ctx.get_parameter_source("workers") is ParameterSource.ENVIRONMENT
    ):
        # TASUKI_WORKERS is also how the supervisor tells its children the group's size:
        # a child runs one worker, its own.
        workers = 1
    if workers > 1 and reload:
        raise click.UsageError(
            f"--reload runs one worker, --workers {workers} asks for {workers}: drop "
            "--workers while developing (--reload is not for production)"
        )
    if workers > 1 or reload:  # this process never imports the app
        _configure_logging(ctx, log_level, log_format, log_config, index)
    if workers > 1 or reload:
        # A child gets every option on its command line but these: it must not read
        # them from the environment either (TASUKI_WORKERS would make each a supervisor).
        from tasuki.cli.reload import DROPPED

        _not_inherited(ctx, SUPERVISOR_ONLY if workers > 1 else DROPPED)
    if workers > 1:
        from tasuki.cli.reload import child_argv
        from tasuki.runtime.supervisor import Supervisor

        supervisor = Supervisor(
            child_argv(ctx, grace, SUPERVISOR_ONLY),
            workers,
            grace,
            metrics=None if metrics_port is None else (metrics_host, metrics_port),
            health=None if health_port is None else (health_host, health_port),
        )
        sys.exit(supervisor.run())
    if reload:
        from tasuki.cli.reload import run

        given = ctx.get_parameter_source("grace") is not ParameterSource.DEFAULT
        sys.exit(run(ctx, reload_dirs, grace if given else None))
    app = load_app(app_spec, param_hint="'MODULE:APP'")
    _configure_logging(ctx, log_level, log_format, log_config, index)
    refuse_in_process(app)
    w = app.worker(
        queues=queues,
        concurrency=concurrency,
        grace=grace,
        processes=processes,
        scheduler=not no_scheduler,
        handle_signals=True,
        inline=not no_inline,
    )
    if supervised is not None:
        serve_child_endpoints(supervised, w, app.middleware, app.backend, stuck_after=stuck_after)
    elif metrics_port is not None or health_port is not None:
        from tasuki.runtime.probes import serve_worker_endpoints

        serve_worker_endpoints(
            w,
            app.middleware,
            app.backend,
            metrics=None if metrics_port is None else (metrics_host, metrics_port),
            health=None if health_port is None else (health_host, health_port),
            stuck_after=stuck_after,
        )
    slice_ = app.backend.gil_slice
    if slice_ is not None and not no_inline and sys.getswitchinterval() == CPYTHON_SLICE:
        sys.setswitchinterval(slice_)  # see Backend.gil_slice; a value set by hand stays
    # Everything loaded so far (modules, the app, its jobs) lives as long as the process:
    # out of the collector's sight, a collection only walks what jobs allocate.
    gc.freeze()
    w.run()


def _configure_logging(
    ctx: click.Context, level: str, fmt: str, config: str | None, index: int | None
) -> None:
    """`--log-config` if given; else the app's own logging, when its module configured
    some at import, unless --log-level or --log-format was asked for; else tasuki's."""
    if config is not None:
        try:
            logs.configure_from_file(config)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--log-config'") from None
        return
    asked = any(
        ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)
        for name in ("log_level", "log_format")
    )
    if asked or not logs.configured_elsewhere():
        logs.configure(level, fmt, index)


def _not_inherited(ctx: click.Context, names: frozenset[str] | set[str]) -> None:
    for param in ctx.command.params:
        if param.name in names and isinstance(param.envvar, str):
            os.environ.pop(param.envvar, None)


def _from_environment(command: click.Command) -> click.Command:
    """Each option also read from TASUKI_<ITS LONG NAME> (`--no-inline`:
    TASUKI_NO_INLINE), shown in --help; MODULE:APP from TASUKI_APP."""
    for param in command.params:
        if isinstance(param, click.Argument):
            param.envvar = "TASUKI_APP"
        elif isinstance(param, click.Option) and param.name != "help":
            longest = max(param.opts, key=len).lstrip("-")
            param.envvar = "TASUKI_" + longest.upper().replace("-", "_")
            param.show_envvar = True
    return command


_from_environment(worker)
