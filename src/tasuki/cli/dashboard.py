"""`tasuki dashboard`: the web UI (extra `tasuki[dashboard]`)."""

from __future__ import annotations

import click

from tasuki.cli.common import app_from_options, app_options, friendly_errors


@click.command()
@app_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8181, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    envvar="TASUKI_DASHBOARD_TOKEN",
    help="Require this token on every request (default: $TASUKI_DASHBOARD_TOKEN). "
    "Needed to bind to anything but the loopback.",
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
    refusal = check_bind(host, token)
    if refusal:
        raise click.UsageError(refusal)
    app = app_from_options(app_spec, url, existing=True)
    asgi = create_app(app, token=token, sample_every=sample_every)
    shown = f"[{host}]" if ":" in host else host
    click.echo(
        f"tasuki dashboard for {redact(app.url)} on http://{shown}:{port}/"
        + (" (token required)" if token else "")
    )
    uvicorn.run(asgi, host=host, port=port, log_level="warning", server_header=False)
