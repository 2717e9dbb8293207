"""`tasuki worker module:app -q a,b -c N --grace S`."""

from __future__ import annotations

import gc
import sys

import click

from tasuki import logs
from tasuki.cli.common import friendly_errors, load_app

CPYTHON_SLICE = 0.005  # sys.getswitchinterval() until someone changes it


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
@friendly_errors
def worker(
    app_spec: str,
    queues: str | None,
    concurrency: int,
    grace: float,
    processes: int | None,
    no_scheduler: bool,
    no_inline: bool,
    log_level: str,
    log_format: str,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Run a worker for the app's jobs until SIGTERM/SIGINT (graceful), or a second one."""
    logs.configure(log_level, log_format)
    app = load_app(app_spec)
    w = app.worker(
        queues=queues,
        concurrency=concurrency,
        grace=grace,
        processes=processes,
        scheduler=not no_scheduler,
        handle_signals=True,
        inline=not no_inline,
    )
    if metrics_port is not None:
        from tasuki.middleware.metrics import serve

        serve(
            app.middleware,
            app.backend,
            metrics_port,
            metrics_host,
            queues=lambda: w.queues,
        )
    slice_ = app.backend.capabilities.gil_slice
    if slice_ is not None and not no_inline and sys.getswitchinterval() == CPYTHON_SLICE:
        sys.setswitchinterval(slice_)  # see Capabilities.gil_slice; a value set by hand stays
    # Everything loaded so far (modules, the app, its jobs) lives as long as the process:
    # out of the collector's sight, a collection only walks what jobs allocate.
    gc.freeze()
    w.run()
