"""The app of the dashboard's browser test: `--app tests.e2e.dashboard_app:app`.

`charge` fails until the file named by $TASUKI_TEST_FIX exists (the "deploy" that fixes
the bug), and then appends the amount to the file named by $TASUKI_TEST_DONE. The test
declares the same jobs on its own App (`declare`) to enqueue them. `report` (its own
queue, which the test's worker process does not serve) runs longer than a third of its
lease, so its lease keeper extends it, and fails its first attempt: a redelivery.
"""

from __future__ import annotations

import os
import time
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


def declare_report(app: tasuki.App) -> Any:
    @app.job(
        name="report",
        queue="reports",
        visibility_timeout=0.6,
        retry=tasuki.Retry(max_attempts=3, backoff=tasuki.constant(0.0)),
    )
    def report(n: int) -> None:
        time.sleep(0.8)  # extended at 0.2 s, 0.4 s, 0.6 s
        if n == 1 and tasuki.current().attempt == 1:
            raise RuntimeError("the first attempt fails")

    return report


app = tasuki.App(os.environ.get("TASUKI_URL", "memory://dashboard-tests"))
charge, send_email = declare(app)
report = declare_report(app)
