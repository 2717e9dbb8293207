"""Entry point of `tasuki` and `python -m tasuki`."""

from __future__ import annotations

import click

from tasuki import __version__
from tasuki.cli.dead import dead
from tasuki.cli.demo import demo
from tasuki.cli.enqueue import enqueue
from tasuki.cli.stats import purge, stats
from tasuki.cli.worker import worker


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tasuki")
def cli() -> None:
    """tasuki: background jobs that never lose a message."""


cli.add_command(worker)
cli.add_command(stats)
cli.add_command(purge)
cli.add_command(dead)
cli.add_command(enqueue)
cli.add_command(demo)


def main() -> None:
    cli(prog_name="tasuki")
