"""A command asked about something that is not there says so, and exits non-zero."""

from __future__ import annotations

from pathlib import Path

import tasuki
from tests.e2e.test_cli import tasuki_cli
from tests.e2e.test_cli_errors import RUNTIME, assert_one_line_error


def test_redrive_names_the_ids_that_are_not_dead_letters(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    app = tasuki.App(url)

    @app.job(retry=tasuki.Retry(max_attempts=1))
    def doomed() -> None:
        raise RuntimeError("no")

    dead = doomed.enqueue()
    app.worker(concurrency=1).run(until_idle=True, timeout=30)
    assert app.stats()["dead"] == 1

    alone = tasuki_cli("dead", "redrive", "default", "nonexistent", "--url", url)
    assert_one_line_error(alone, RUNTIME, "no dead letter 'nonexistent' in queue 'default'")
    assert alone.stdout == ""

    both = tasuki_cli("dead", "redrive", "default", dead, "nonexistent", "--url", url)
    assert both.returncode == 1
    assert both.stdout.strip() == "re-drove 1 message(s) to 'default'"
    assert "Error: no dead letter 'nonexistent' in queue 'default'" in both.stderr
    s = app.stats()
    assert (s["dead"], s["ready"]) == (0, 1)
    app.close()
