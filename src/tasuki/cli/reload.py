"""`tasuki worker --reload`: a development loop that restarts the worker when the code
changes (extra `tasuki[reload]`: watchfiles, which waits on the OS's file events).

This process only watches; the worker runs in a child process, the same command
without `--reload`, in a process group of its own so that a Ctrl-C in the terminal
reaches it once, through here. On a change of a `.py` file the child is stopped the
way a deploy stops it (SIGTERM: stop leasing, running jobs get the grace, what is left
is released without penalty, exit 0) and only then started again, so the new worker
leases what the old one held, at the same attempt, with the new code. A child that
exits on its own (a syntax error in the new code) is started again at the next change.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from types import FrameType
from typing import Any

import click

from tasuki import logs

# Seconds running jobs get when the worker restarts, unless --grace is given: someone
# who saved a file waits for the new code, not for the old jobs.
RELOAD_GRACE = 1.0
# Beyond the grace, what the child may take to hand back and flush before it is killed.
STOP_MARGIN = 30.0
DROPPED = {"reload", "reload_dirs", "workers"}


def child_argv(
    ctx: click.Context, grace: float, dropped: frozenset[str] | set[str] = DROPPED
) -> list[str]:
    """The command line of this very command, as parsed, without the options `dropped`
    (by default the reload options)."""
    argv: list[str] = []
    for param in ctx.command.params:
        name = param.name or ""
        value: Any = grace if name == "grace" else ctx.params.get(name)
        if name in dropped or value is None:
            continue
        if isinstance(param, click.Argument):
            argv.append(str(value))
            continue
        assert isinstance(param, click.Option)
        flag = max(param.opts, key=len)
        if param.is_flag:
            if value:
                argv.append(flag)
            elif param.secondary_opts:
                argv.append(param.secondary_opts[0])
        elif param.multiple:
            argv += [f"{flag}={item}" for item in value]
        else:
            argv.append(f"{flag}={value}")
    return [sys.executable, "-m", "tasuki", *ctx.command_path.split()[1:], *argv]


def _names(changes: Iterable[tuple[object, str]], root: Path) -> str:
    paths = sorted({Path(p) for _, p in changes})
    shown = [str(p.relative_to(root)) if p.is_relative_to(root) else str(p) for p in paths]
    return ", ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")


class Reloader:
    def __init__(self, argv: list[str], dirs: list[Path], grace: float) -> None:
        self.argv = argv
        self.dirs = dirs
        self.stop_timeout = grace + STOP_MARGIN
        self.stopping = threading.Event()
        self.signals = 0
        self.child: subprocess.Popen[bytes] | None = None
        self.signalled = False  # the child has had its SIGTERM
        self.reported_exit = False

    def start(self) -> None:
        self.child = subprocess.Popen(self.argv, process_group=0)
        self.signalled = self.reported_exit = False
        logs.logger.info("reload: worker started (pid %d)", self.child.pid)

    def stop_child(self) -> int | None:
        """SIGTERM, then wait for the graceful stop; SIGKILL only past grace + margin."""
        child = self.child
        if child is None:
            return None
        if child.poll() is None:
            if not self.signalled:
                self.signalled = True
                child.send_signal(signal.SIGTERM)
            try:
                child.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                logs.logger.error(
                    "reload: worker %d did not stop within %.0fs: killed; its leases will lapse",
                    child.pid,
                    self.stop_timeout,
                )
                child.kill()
                child.wait()
        return child.returncode

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        self.stopping.set()
        child = self.child
        if child is not None and child.poll() is None:
            # The first asks the worker to stop gracefully, a second to exit at once:
            # the worker's own rule, passed on.
            self.signalled = True
            child.send_signal(signal.SIGTERM)

    def run(self) -> int:
        from watchfiles import PythonFilter, watch

        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, self._on_signal)
        root = Path.cwd()
        logs.logger.info(
            "reload: watching %s for changes to .py files",
            ", ".join(str(d) for d in self.dirs),
        )
        self.start()
        for changes in watch(
            *self.dirs,
            watch_filter=PythonFilter(),
            stop_event=self.stopping,
            yield_on_timeout=True,
            rust_timeout=500,
            raise_interrupt=False,
        ):
            if self.stopping.is_set():
                break
            if not changes:
                self._report_exit()
                continue
            logs.logger.warning(
                "reload: %s changed: stopping the worker, then starting it again",
                _names(changes, root),
            )
            status = self.stop_child()
            if not self.stopping.is_set():
                logs.logger.info("reload: worker exited with status %s", status)
                self.start()
        status = self.stop_child()
        return 0 if status is None else status

    def _report_exit(self) -> None:
        child = self.child
        if child is not None and child.poll() is not None and not self.reported_exit:
            self.reported_exit = True
            logs.logger.error(
                "reload: worker exited with status %d; waiting for a change to start it again",
                child.returncode,
            )


def run(ctx: click.Context, dirs: tuple[str, ...], grace: float | None) -> int:
    """Watch the working directory and `dirs`, and run the worker in a child process."""
    try:
        import watchfiles  # noqa: F401
    except ImportError as exc:
        raise click.ClickException(
            f"--reload needs its extra: pip install 'tasuki[reload]' ({exc})"
        ) from exc
    effective = RELOAD_GRACE if grace is None else grace
    watched = [Path.cwd(), *(Path(d).resolve() for d in dirs)]
    return Reloader(child_argv(ctx, effective), watched, effective).run()
