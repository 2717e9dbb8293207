"""An app whose module configures logging itself at import, as many apps do."""

from __future__ import annotations

import logging
import os

import tasuki

logging.basicConfig(
    filename=os.environ["TASUKI_TEST_LOGFILE"],
    format="app-format %(levelname)s %(message)s",
    level=logging.INFO,
)

app = tasuki.App(os.environ["TASUKI_URL"])


@app.job(retry=tasuki.Retry(max_attempts=1))
def fail(n: int) -> None:
    raise ValueError(f"no such order {n}")
