"""The dashboard's console pages in a real headless Chromium: the job browser with its
filters, order and pages; a message's job, arguments and kept result; retry now, cancel
one, and the bulk retry and cancel of what a filter matches, confirmed with its count;
the per-job pages and their charts; the workers page and its stop; pause and resume; and
the pages updating themselves without a reload, and not while the tab is hidden.

The dashboard runs as `tasuki dashboard` on a SQLite file (the fixtures of
test_dashboard.py); the jobs run in workers of this process, which announce themselves
often. Screenshots go to the test's tmp dir; with TASUKI_UPDATE_SCREENSHOT=1 each page is
also saved in docs/images/ (docs/operating.md shows them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tasuki
from tests.e2e import test_dashboard as shared
from tests.e2e.dashboard_app import declare
from tests.e2e.test_dashboard import (
    ROOT,
    Stack,
    _free_port,
    _log_in,
    _reachable,
    _request,
    _wait_for,
)
from tests.support.processes import env_with_src

# The browser and the dashboard of test_dashboard.py.
chromium_path, page, stack = shared.chromium_path, shared.page, shared.stack


def _shot(page: Any, stack: Stack, name: str) -> None:
    """The page's screenshot, and docs/images/NAME.png when asked for."""
    path = stack.shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get("TASUKI_UPDATE_SCREENSHOT") == "1":
        shutil.copy(path, ROOT / "docs" / "images" / f"{name}.png")


def _click(page: Any, selector: str) -> None:
    """Click what loads another page, and wait for that page."""
    with page.expect_navigation():
        page.click(selector)


def _ids(page: Any) -> list[str]:
    rows = page.locator("#messages tbody tr")
    return [rows.nth(i).get_attribute("data-id") for i in range(rows.count())]


class Running:
    """A worker of this process on `queues`, announcing itself every 0.2 s."""

    def __init__(self, app: tasuki.App, queues: list[str]) -> None:
        self.worker = app.worker(queues, concurrency=2, announce_every=0.2)
        self.thread = threading.Thread(target=self.worker.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.worker.stop(grace=1.0)
        self.thread.join(10)


@pytest.fixture
def running(stack: Stack) -> Iterator[list[Running]]:
    started: list[Running] = []
    yield started
    for r in started:
        r.stop()


def test_browser_filters_orders_and_pages(stack: Stack, page: Any) -> None:
    charge, send_email = declare(stack.app)
    for i in range(60):
        send_email.options(delay=3600, message_id=f"mail-{i:02d}").enqueue(i)
    charge.options(delay=3600, message_id="order-7").enqueue(amount=7)
    _log_in(page, stack)
    page.goto(stack.base + "/queues/emails")
    _click(page, "#browse")
    assert page.locator("#no-messages").count() == 1  # nothing ready: all are delayed
    _click(page, "#states a[data-state=delayed]")
    first = _ids(page)
    assert first == [f"mail-{i:02d}" for i in range(50)]  # oldest first, a page of 50
    assert "ready at" in page.locator("#messages thead").inner_text().lower()
    _click(page, "#next-page")
    assert _ids(page) == [f"mail-{i:02d}" for i in range(50, 60)]
    assert page.locator("#next-page").count() == 0
    _click(page, "#first-page")
    page.select_option("select[name=order]", "newest")
    _click(page, "#filter button")
    assert _ids(page)[:2] == ["mail-59", "mail-58"]
    page.fill("input[name=match]", "0=42")
    _click(page, "#filter button")
    assert _ids(page) == ["mail-42"]
    assert page.locator("#messages tbody td").nth(2).inner_text() == "42"
    _shot(page, stack, "dashboard-browse")
    # The job filter on another queue, by keyword argument.
    page.goto(stack.base + "/queues/billing/browse?state=delayed&job=charge&match=amount%3D7")
    assert _ids(page) == ["order-7"]
    assert page.locator("#messages tbody td").nth(2).inner_text() == "amount=7"
    page.goto(stack.base + "/queues/billing/browse?state=delayed&job=refund")
    assert "matches the filter" in page.locator("#no-messages").inner_text()


def test_message_page_retry_now_and_cancel(stack: Stack, page: Any) -> None:
    _, send_email = declare(stack.app)
    send_email.options(delay=3600, message_id="mail-7").enqueue(7)
    _log_in(page, stack)
    page.goto(stack.base + "/queues/emails/messages/mail-7")
    assert page.locator("[data-field=state]").inner_text() == "delayed"
    assert page.locator("[data-field=job]").inner_text() == "send_email"
    assert page.locator("[data-field=arguments]").inner_text() == "7"
    _shot(page, stack, "dashboard-message")
    _click(page, "#retry-now")
    assert "Are you sure?" in page.content()
    assert stack.app.inspect("emails", "mail-7").state == "delayed"  # asked first
    _click(page, "#confirm")
    assert "mail-7 is ready now" in page.locator(".notice").inner_text()
    assert page.locator("[data-field=state]").inner_text() == "ready"
    assert stack.app.inspect("emails", "mail-7").state == "ready"
    assert page.locator("#retry-now").count() == 0  # ready: nothing to cut short
    _click(page, "#cancel")
    assert "Are you sure?" in page.content()
    assert stack.app.inspect("emails", "mail-7").state == "ready"  # asked first
    _click(page, "#confirm")
    assert "cancel mail-7: removed" in page.locator(".notice").inner_text()
    assert stack.app.inspect("emails", "mail-7").state == "cancelled"


def test_bulk_retry_and_cancel_confirmed_with_the_count(stack: Stack, page: Any) -> None:
    _, send_email = declare(stack.app)
    for i in range(5):
        send_email.options(delay=3600).enqueue(i)
    for _ in range(3):
        send_email.options(delay=3600).enqueue(99)
    _log_in(page, stack)
    page.goto(stack.base + "/queues/emails/browse?state=delayed&match=0%3D99")
    assert len(_ids(page)) == 3
    _click(page, "#cancel-matching")
    assert page.locator("#match-count").inner_text() == "3"
    _shot(page, stack, "dashboard-bulk-confirm")
    assert stack.app.stats("emails")["delayed"] == 8  # nothing happened yet
    _click(page, "#confirm")
    assert "cancelled 3 message(s)" in page.locator(".notice").inner_text()
    assert stack.app.stats("emails")["delayed"] == 5
    assert page.locator("#no-messages").count() == 1
    # Every delayed one, made ready in one request after its count.
    page.goto(stack.base + "/queues/emails/browse?state=delayed")
    _click(page, "#retry-matching")
    assert page.locator("#match-count").inner_text() == "5"
    _click(page, "#confirm")
    assert "retried 5 message(s)" in page.locator(".notice").inner_text()
    stats = stack.app.stats("emails")
    assert (stats["delayed"], stats["ready"]) == (0, 5)
    # Every action's POST without the session's CSRF token is refused, changing nothing.
    ready_one = stack.app.messages("emails", "ready", limit=1).items[0].id
    for path, fields in [
        ("/queues/emails/bulk/cancel", {"state": "ready"}),
        ("/queues/emails/bulk/retry", {"state": "delayed"}),
        ("/queues/emails/cancel", {"id": ready_one}),
        ("/queues/emails/retry-now", {"id": ready_one}),
        ("/queues/emails/pause", {}),
        ("/workers/some-worker/stop", {}),
    ]:
        for csrf in ({}, {"csrf": "not-the-token"}):
            response = page.request.post(
                stack.base + path,
                form={"confirm": "yes", **fields, **csrf},
                headers={"Origin": stack.base},
                max_redirects=0,
            )
            assert response.status == 403, (path, csrf)
    assert stack.app.stats("emails")["ready"] == 5
    assert stack.app.paused() == set()


def test_job_pages_chart_outcomes_and_run_times(
    stack: Stack, page: Any, running: list[Running], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("TASUKI_TEST_FIX", "TASUKI_TEST_DONE"):  # what `charge` reads
        monkeypatch.setenv(name, stack.env[name])
    charge, send_email = declare(stack.app)
    send_email.enqueue_many([(i,) for i in range(40)])
    charge.enqueue(13)  # declined: dead at its first attempt

    @stack.app.job(name="total", queue="emails", keep_result=600)
    def total(a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    summed = total.options(message_id="sum-1").enqueue(1, 2)
    running.append(Running(stack.app, ["emails", "billing"]))
    _wait_for(
        lambda: (s := stack.app.job_stats("emails").get("send_email")) and s.succeeded == 40,
        what="the runs counted",
    )
    _wait_for(lambda: "charge" in stack.app.job_stats("billing"), what="the failure counted")
    _log_in(page, stack)
    page.goto(stack.base + "/queues/emails")
    _click(page, "#jobs")
    assert page.locator("tr[data-job=send_email] td[data-stat=succeeded]").inner_text() == "40"
    _click(page, "a:has-text('send_email')")
    assert page.locator("#job-stats td[data-stat=succeeded]").inner_text() == "40"
    assert page.locator("#job-stats td[data-stat=p50]").inner_text() != "-"
    assert page.locator("svg.chart polyline.succeeded").count() == 1
    _shot(page, stack, "dashboard-job")
    # A finished message's kept result, on its page.
    _wait_for(lambda: stack.app.inspect("emails", summed).state == "finished", what="summed")
    page.goto(stack.base + "/queues/emails/messages/sum-1")
    assert page.locator("[data-field=result]").inner_text() == 'ok: {"sum":3}'
    page.goto(stack.base + "/queues/billing/jobs/charge?window=15m")
    assert page.locator("#job-stats td[data-stat=dead]").inner_text() == "1"
    assert page.locator("#job-stats td[data-stat=failed]").inner_text() == "1"


def test_workers_page_shows_what_runs_and_stops_a_worker(
    stack: Stack, page: Any, running: list[Running]
) -> None:
    release = stack.fix.parent / "release"
    app = stack.app

    @app.job(name="hold", queue="slow")
    def hold() -> None:
        _wait_for(release.exists, timeout=60, what="the release")

    hold.options(message_id="held-1").enqueue()
    worker = Running(app, ["slow"])
    running.append(worker)
    _wait_for(lambda: any(w.running for w in app.workers()), what="the worker announcing its run")
    [worker_id] = [w.id for w in app.workers()]
    _log_in(page, stack)
    _click(page, "header a.nav")
    row = page.locator(f"tr[data-worker='{worker_id}']")
    assert "hold" in row.locator("[data-field=running]").inner_text()
    _shot(page, stack, "dashboard-workers")
    with page.expect_navigation():
        row.locator("[data-stop]").click()
    assert "Are you sure?" in page.content()
    _click(page, "#confirm")
    assert f"asked {worker_id} to stop" in page.locator(".notice").inner_text()
    release.touch()
    worker.thread.join(30)
    assert not worker.thread.is_alive()  # it drained and exited
    # Live: the row is marked gone without a reload.
    page.evaluate("window.marker = 1")
    _wait_for(lambda: row.locator("[data-field=gone]").count() == 1, what="gone marked")
    assert page.evaluate("window.marker") == 1


def test_pause_resume_and_live_updates_that_stop_when_hidden(stack: Stack, page: Any) -> None:
    _, send_email = declare(stack.app)
    send_email.enqueue(1)
    _log_in(page, stack)
    page.goto(stack.base + "/queues/emails")
    _click(page, "#pause")
    assert stack.app.paused() == set()  # asked first
    _click(page, "#confirm")
    assert "paused emails" in page.locator(".notice").inner_text()
    assert stack.app.paused() == {"emails"}
    page.goto(stack.base + "/")
    assert page.locator("tr[data-queue=emails] [data-field=paused]").count() == 1
    _shot(page, stack, "dashboard-queues")
    # Counts change without a reload while the tab is shown...
    page.evaluate("window.marker = 1")
    send_email.enqueue_many([(i,) for i in range(4)])
    _wait_for(
        lambda: page.locator("tr[data-queue=emails] td[data-count=ready]").inner_text() == "5",
        what="the count updated",
    )
    assert page.evaluate("window.marker") == 1
    # ... and no poll is sent while it is hidden.
    page.evaluate(
        "Object.defineProperty(document, 'hidden', {value: true, configurable: true});"
        "document.dispatchEvent(new Event('visibilitychange'))"
    )
    polls = page.evaluate("window.tasukiLive.polls")
    time.sleep(3.5)
    assert page.evaluate("window.tasukiLive.polls") == polls
    page.evaluate(
        "Object.defineProperty(document, 'hidden', {value: false, configurable: true});"
        "document.dispatchEvent(new Event('visibilitychange'))"
    )
    _wait_for(lambda: page.evaluate("window.tasukiLive.polls") > polls, what="polls again")
    page.goto(stack.base + "/queues/emails")
    _click(page, "#resume")
    _click(page, "#confirm")
    assert "resumed emails" in page.locator(".notice").inner_text()
    assert stack.app.paused() == set()
    assert page.locator("#pause").count() == 1


def test_a_backend_without_the_capability_says_so(
    tmp_path: Path, page: Any, sqs_server: Any
) -> None:
    """SQS without a lock store keeps no console records and cannot list messages: each
    page says so in the refusal's words, with a 200, never a 500."""
    prefix = f"console{tmp_path.name[-6:]}-"
    url = f"sqs://us-east-1?endpoint_url={sqs_server.endpoint}&prefix={prefix}"
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tasuki", "dashboard", "--url", url, "--port", str(port)],
        env=env_with_src(),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for(lambda: _reachable(base, proc), what="the dashboard answering")
        for path in ("/queues/emails/browse?state=ready", "/workers", "/queues/emails/jobs"):
            page.goto(base + path)
            assert page.locator("#refused").count() == 1, path
            assert "sqs://" in page.locator("#refused").inner_text()
        status, body = _request(base + "/queues/emails/bulk/cancel?state=dead")
        assert status == 200 and 'id="refused"' in body
        status, body = _request(base + "/queues/emails")
        assert status == 200 and 'id="pause"' not in body  # no pause button without it
        page.goto(base + "/queues/emails/messages/some-id")  # SQS keeps no inspection
        assert "sqs://" in page.locator("#refused").inner_text()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        assert proc.stderr is not None
        proc.stderr.close()
