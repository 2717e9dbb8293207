"""The dashboard: `tasuki dashboard`, a small server-rendered web UI (extra `tasuki[dashboard]`).

`create_app(app, token=...)` returns the ASGI application; `tasuki dashboard` serves it
with uvicorn. Pages are rendered on the server from Jinja2 templates, with no script
beyond a periodic refresh; each page view reads the queues' stats and one page of dead
letters, never a scan of the messages.
"""

from tasuki.web.app import create_app

__all__ = ["create_app"]
