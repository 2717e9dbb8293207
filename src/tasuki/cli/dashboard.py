"""`tasuki dashboard`: the web UI (extra `tasuki[dashboard]`)."""

from __future__ import annotations

import errno
import socket
import stat
from pathlib import Path

import click
from click.core import ParameterSource

from tasuki.cli.common import app_from_options, app_options, friendly_errors

DEFAULT_SESSION_LIFETIME = 8 * 3600.0


@click.command()
@app_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8181, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    envvar="TASUKI_DASHBOARD_TOKEN",
    help="Require this token on every request (default: $TASUKI_DASHBOARD_TOKEN). "
    "Needed to bind to anything but the loopback. On the command line other users of "
    "the machine can read it (ps): prefer --token-file or the environment.",
)
@click.option(
    "--token-file",
    envvar="TASUKI_DASHBOARD_TOKEN_FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Read the token from this file (its first line; default: $TASUKI_DASHBOARD_TOKEN_FILE).",
)
@click.option(
    "--session-lifetime",
    default=DEFAULT_SESSION_LIFETIME,
    show_default=True,
    type=click.FloatRange(min=60),
    metavar="SECONDS",
    help="How long a login lasts at most (an hour unused ends it sooner, and so does "
    "logging out or restarting the dashboard).",
)
@click.option(
    "--sample-every",
    default=5.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    metavar="SECONDS",
    help="How often the dashboard samples the queues for its rate charts.",
)
@friendly_errors
def dashboard(
    app_spec: str | None,
    url: str | None,
    host: str,
    port: int,
    token: str | None,
    token_file: Path | None,
    session_lifetime: float,
    sample_every: float,
) -> None:
    """Serve the dashboard: queues, rates, dead letters, messages, re-drive and purge."""
    try:
        import uvicorn

        from tasuki.backends.urls import redact
        from tasuki.web import create_app
        from tasuki.web.security import check_bind
    except ImportError as exc:
        raise click.ClickException(
            f"the dashboard needs its extra: pip install 'tasuki[dashboard]' ({exc})"
        ) from exc
    context = click.get_current_context()
    if token_file is not None:
        if token:
            raise click.UsageError(
                "give the token once: --token-file or --token (or TASUKI_DASHBOARD_TOKEN)"
            )
        token = read_token_file(token_file)
    elif token and context.get_parameter_source("token") is ParameterSource.COMMANDLINE:
        click.echo(
            "warning: a --token on the command line is visible to every user of this "
            "machine (ps); prefer --token-file or TASUKI_DASHBOARD_TOKEN",
            err=True,
        )
    refusal = check_bind(host, token)
    if refusal:
        raise click.UsageError(refusal)
    app = app_from_options(app_spec, url, existing=True)
    asgi = create_app(
        app, token=token, sample_every=sample_every, session_lifetime=session_lifetime
    )
    listening = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    click.echo(
        f"tasuki dashboard for {redact(app.url)} on "
        f"http://{shown}:{listening.getsockname()[1]}/" + (" (token required)" if token else "")
    )
    config = uvicorn.Config(asgi, host=host, port=port, log_level="warning", server_header=False)
    uvicorn.Server(config).run(sockets=[listening])


def read_token_file(path: Path) -> str:
    """The token on the first line of `path` (surrounding blanks and the newline off).

    A file others can read is allowed, with a warning: the token is what they would
    need to act on the queues.
    """
    try:
        mode = path.stat().st_mode
        lines = path.read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(
            f"cannot read {str(path)!r}: {exc}", param_hint="'--token-file'"
        ) from exc
    token = lines[0].strip() if lines else ""
    if not token:
        raise click.BadParameter(f"{str(path)!r} holds no token", param_hint="'--token-file'")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        click.echo(
            f"warning: {path} can be read by other users (mode {stat.S_IMODE(mode):04o}): "
            f"chmod 600 {path}",
            err=True,
        )
    return token


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything says the dashboard is serving: a port
    in use is one `Error:` line, never a "serving on" line followed by the server's own
    failure."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise click.ClickException(f"port {port} on {host} is in use") from exc
        raise click.ClickException(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from exc
    except BaseException:
        sock.close()
        raise
    return sock
