"""`tasuki retry QUEUE --all` and `tasuki cancel QUEUE --all`, run as an operator would:
the count first and a question (answered no: nothing changes), `--yes` to skip it, and
the filter (state, job, arguments) choosing what is changed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tasuki
from tests.e2e.test_cli import ROOT, tasuki_cli
from tests.support.processes import env_with_src


def _answering(answer: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tasuki", *args],
        input=answer,
        capture_output=True,
        text=True,
        env=env_with_src(),
        cwd=ROOT,
        timeout=90,
        check=False,
    )


def test_retry_all_and_cancel_all_count_ask_then_act(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ops.db'}"
    app = tasuki.App(url)

    @app.job()
    def bill(amount: int, customer: str = "") -> None: ...

    @app.job()
    def other() -> None: ...

    for n in range(4):
        bill.options(delay=600.0).enqueue(n, customer="acme" if n < 3 else "x")
    other.options(delay=600.0).enqueue()
    for n in range(2):
        bill.enqueue(n, customer="acme")

    asked = _answering("n\n", "retry", "default", "--all", "--match", "customer=acme", "--url", url)
    assert asked.returncode == 1  # aborted
    assert "retry 3 delayed message(s) of 'default'" in asked.stdout
    assert app.stats("default")["delayed"] == 5

    said_yes = _answering(
        "y\n",
        "retry",
        "default",
        "--all",
        "--job",
        "bill",
        "--match",
        "customer=acme",
        "--url",
        url,
    )
    assert said_yes.returncode == 0, said_yes.stderr
    assert "retried 3 message(s)" in said_yes.stdout
    stats = app.stats("default")
    assert (stats["delayed"], stats["ready"]) == (2, 5)

    cancelled = tasuki_cli(
        "cancel", "default", "--all", "--match", "customer=acme", "--yes", "--url", url
    )
    assert cancelled.returncode == 0, cancelled.stderr
    assert "cancelled 5 message(s)" in cancelled.stdout  # ready is cancel's default state
    assert app.stats("default")["ready"] == 0
    cancelled = tasuki_cli(
        "cancel", "default", "--all", "--state", "delayed", "--job", "other", "--yes", "--url", url
    )
    assert "cancelled 1 message(s)" in cancelled.stdout
    assert app.stats("default")["delayed"] == 1

    nothing = tasuki_cli("retry", "default", "--all", "--job", "refund", "--url", url)
    assert nothing.returncode == 0 and "nothing to retry" in nothing.stdout
    both = tasuki_cli("retry", "default", "some-id", "--all", "--url", url)
    assert both.returncode == 2 and "not both" in both.stderr
    app.close()
