"""The app of the dashboard's browser test: `--app tests.e2e.dashboard_app:app`.

`charge` fails until the file named by $TASUKI_TEST_FIX exists (the "deploy" that fixes
the bug), and then appends the amount to the file named by $TASUKI_TEST_DONE. The test
declares the same jobs on its own App (`declare`) to enqueue them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import tasuki


def declare(app: tasuki.App) -> tuple[Any, Any]:
    @app.job(name="charge", queue="billing", retry=tasuki.Retry(max_attempts=1))
    def charge(amount: int) -> None:
        if not Path(os.environ["TASUKI_TEST_FIX"]).exists():
            raise ValueError(f"card declined for {amount}")
        with open(os.environ["TASUKI_TEST_DONE"], "a") as done:
            done.write(f"{amount}\n")

    @app.job(name="send_email", queue="emails")
    def send_email(n: int) -> None:
        pass

    return charge, send_email


app = tasuki.App(os.environ.get("TASUKI_URL", "memory://dashboard-tests"))
charge, send_email = declare(app)
