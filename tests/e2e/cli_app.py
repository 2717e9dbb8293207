"""An app for the command-line tests: `--app tests.e2e.cli_app:app`."""

from __future__ import annotations

import os
import tempfile

import tasuki

# A file other processes can open: the command line refuses memory://, which lives in one.
app = tasuki.App(
    os.environ.get("TASUKI_URL", f"sqlite:///{tempfile.gettempdir()}/tasuki-cli-tests.db")
)


@app.job(queue="images")
def resize(image_id: int) -> None:
    print(f"resizing {image_id}")
