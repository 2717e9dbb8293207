"""Entry point of `tasuki` and `python -m tasuki`.

Each command's module is imported only when that command runs: a worker starts without
paying for the tables and progress bars of the operating commands, and every deploy of
a worker fleet pays its start-up time again.
"""

from __future__ import annotations

import importlib

import click

from tasuki import __version__

# command name -> (module under tasuki.cli, attribute)
COMMANDS: dict[str, tuple[str, str]] = {
    "worker": ("worker", "worker"),
    "stats": ("stats", "stats"),
    "purge": ("stats", "purge"),
    "dead": ("dead", "dead"),
    "enqueue": ("enqueue", "enqueue"),
    "demo": ("demo", "demo"),
    "migrate": ("migrate", "migrate"),
    "inspect": ("inspect", "inspect"),
    "cancel": ("cancel", "cancel"),
    "result": ("result", "result"),
    "flow": ("flow", "flow"),
    "dashboard": ("dashboard", "dashboard"),
    "pause": ("console", "pause"),
    "resume": ("console", "resume"),
    "ls": ("console", "ls"),
    "retry": ("console", "retry"),
    "workers": ("console", "workers"),
    "jobs": ("console", "jobs"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        command: click.Command = getattr(
            importlib.import_module(f"tasuki.cli.{where[0]}"), where[1]
        )
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tasuki")
def cli() -> None:
    """tasuki: background jobs that never lose a message."""


def main() -> None:
    cli(prog_name="tasuki")
