"""The jobs, and the tasuki App they belong to: imported by the web app and the worker."""

from __future__ import annotations

import tasuki

# TASUKI_URL picks the backend (e.g. redis://localhost:6379/0); else sqlite:///tasuki.db.
app = tasuki.App()


@app.job(queue="thumbnails", retry=tasuki.Retry(max_attempts=3), timeout=30.0)
def make_thumbnail(image_id: int, size: int = 128) -> None:
    ctx = tasuki.current()
    print(f"thumbnail {size}px of image {image_id} (attempt {ctx.attempt})", flush=True)
