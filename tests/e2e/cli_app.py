"""An app for the command-line tests: `--app tests.e2e.cli_app:app`."""

from __future__ import annotations

import os

import tasuki

app = tasuki.App(os.environ.get("TASUKI_URL", "memory://cli-tests"))


@app.job(queue="images")
def resize(image_id: int) -> None:
    print(f"resizing {image_id}")
