"""The dashboard in a real headless Chromium (Debian's `chromium`, driven by Playwright).

The dashboard and a worker run as the user runs them (`tasuki dashboard`, `tasuki
worker`), on one SQLite file; the browser logs in with the token, reads the counts,
opens a dead letter's traceback, re-drives it with clicks (and the worker then runs
it), and is asked before a purge. Requests without the token, and a POST from another
origin, are refused. A scripted run's reliability counts (a lost lease, redeliveries,
heartbeat lags) are shown as the backend counted them. Screenshots go to the test's tmp
dir; with TASUKI_UPDATE_SCREENSHOT=1 the queues page is also saved as
docs/images/dashboard.png and the reliability section as dashboard-reliability.png.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import playwright.sync_api as playwright_sync
import pytest

import tasuki
from tasuki.core.reliability import Histogram
from tasuki.web.security import COOKIE
from tests.e2e.dashboard_app import declare, declare_report
from tests.support.processes import env_with_src

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TOKEN = "s3cret-dashboard-token"
APP = "tests.e2e.dashboard_app:app"


def _ensure_chromium() -> str:
    """Debian's chromium; installed with apt-get when missing (never `playwright install`).

    `./dev test` installs it first; this is for a run of pytest alone. Test processes
    take turns (a file lock): two apt-gets at once fail on apt's own lock.
    """
    with open(Path(tempfile.gettempdir()) / "tasuki-apt.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(CHROMIUM):
            subprocess.run(["apt-get", "update", "-qq"], check=True, timeout=300)
            subprocess.run(
                ["apt-get", "install", "-y", "-qq", "chromium"],
                check=True,
                timeout=900,
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
            )
    return CHROMIUM


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(check: Any, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met in {timeout}s")
        time.sleep(0.05)


@dataclass
class Stack:
    base: str
    url: str
    app: tasuki.App
    fix: Path
    done: Path
    shots: Path
    env: dict[str, str]


def _request(
    url: str, *, method: str = "GET", headers: dict[str, str] | None = None, data: bytes = b""
) -> tuple[int, str]:
    req = urllib.request.Request(
        url, data=data if method == "POST" else None, method=method, headers=headers or {}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture(scope="module")
def chromium_path() -> str:
    return _ensure_chromium()


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    url = f"sqlite:///{tmp_path / 'dash.db'}"
    env = env_with_src()
    env.update(
        TASUKI_URL=url,
        TASUKI_TEST_FIX=str(tmp_path / "fixed"),
        TASUKI_TEST_DONE=str(tmp_path / "done.txt"),
    )
    port = _free_port()
    app = tasuki.App(url)
    app.backend.ping()  # creates the database, which the dashboard expects to exist
    dashboard = subprocess.Popen(
        [
            *(sys.executable, "-m", "tasuki", "dashboard", "--url", url),
            *("--port", str(port), "--token", TOKEN, "--sample-every", "0.3"),
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: _reachable(base, dashboard), what="the dashboard answering")
        shots = tmp_path / "screenshots"
        shots.mkdir()
        yield Stack(base, url, app, tmp_path / "fixed", tmp_path / "done.txt", shots, env)
    finally:
        dashboard.terminate()
        dashboard.wait(timeout=30)
        assert dashboard.stderr is not None
        dashboard.stderr.close()
        app.close()


def _reachable(base: str, proc: subprocess.Popen[bytes]) -> bool:
    if proc.poll() is not None:
        assert proc.stderr is not None
        raise AssertionError(f"the dashboard exited: {proc.stderr.read().decode()}")
    try:
        with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), timeout=0.2):
            return True
    except OSError:
        return False


@pytest.fixture
def worker(stack: Stack) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tasuki", "worker", APP, "-q", "billing,emails", "-c", "4"],
        env=stack.env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    yield proc
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture
def page(chromium_path: str) -> Iterator[Any]:
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        try:
            yield context.new_page()
        finally:
            context.close()
            browser.close()


def _log_in(page: Any, stack: Stack) -> None:
    page.goto(stack.base + "/")
    assert "/login" in page.url  # no token yet: the login form
    page.fill("input[name=token]", TOKEN)
    page.click("button.primary")
    page.wait_for_url(stack.base + "/")


def _counts(page: Any, row: str, attribute: str = "data-count") -> dict[str, str]:
    cells = page.locator(f"{row} td[{attribute}]")
    return {
        cells.nth(i).get_attribute(attribute): cells.nth(i).inner_text()
        for i in range(cells.count())
    }


def test_counts_dead_letter_traceback_and_redrive(
    stack: Stack, worker: subprocess.Popen[bytes], page: Any
) -> None:
    charge, send_email = declare(stack.app)
    # A card that is declined: one attempt, then a dead letter with its traceback.
    message_id = charge.options(message_id="order-1001").enqueue(1001)
    _wait_for(lambda: stack.app.stats("billing")["dead"] == 1, what="the dead letter")
    # Work in bursts for the rate chart, and a delayed message, so every count has a value.
    send_email.options(delay=3600).enqueue(-1)
    for burst in range(4):
        send_email.enqueue_many([(i,) for i in range(100 * (burst + 1))])
        time.sleep(0.6)
    _wait_for(lambda: stack.app.stats("emails")["ready"] == 0, what="the emails drained")
    time.sleep(0.7)  # a few more samples for the chart

    _log_in(page, stack)
    for queue in ("billing", "emails"):
        shown = _counts(page, f"tr[data-queue={queue}]")
        stats = stack.app.stats(queue)
        assert {k: int(v) for k, v in shown.items() if k != "oldest_ready_age"} == {
            "ready": stats["ready"],
            "in_flight": stats["in_flight"],
            "delayed": stats["delayed"],
            "dead": stats["dead"],
        }
    assert _counts(page, "tr[data-queue=billing]")["dead"] == "1"
    assert _counts(page, "tr[data-queue=emails]")["delayed"] == "1"
    assert page.locator("svg.chart polyline.acked").count() >= 1
    page.screenshot(path=str(stack.shots / "queues.png"), full_page=True)
    if os.environ.get("TASUKI_UPDATE_SCREENSHOT") == "1":
        shutil.copy(stack.shots / "queues.png", ROOT / "docs" / "images" / "dashboard.png")

    # The dead letter, its reason and its traceback.
    page.click("a[href='/queues/billing']")
    row = page.locator(f"#dead-letters tr[data-id='{message_id}']")
    assert "card declined for 1001" in row.inner_text()
    assert row.locator("[data-field=job]").inner_text() == "charge"
    row.locator(f"a:has-text('{message_id}')").click()
    assert page.locator("[data-field=state]").inner_text() == "dead"
    traceback = page.locator("#traceback").inner_text()
    assert "Traceback (most recent call last)" in traceback
    assert "ValueError: card declined for 1001" in traceback
    # From the job's own frame: tasuki's above it collapsed into one line.
    lines = traceback.strip().splitlines()
    assert lines[1].strip() == "[1 frame of tasuki]", traceback
    assert lines[2].rstrip().endswith(", in charge"), traceback
    assert "tasuki/runtime" not in traceback
    assert "dead" in page.locator("#history").inner_text()
    page.screenshot(path=str(stack.shots / "dead-letter.png"), full_page=True)

    # The bug is fixed; re-drive by clicks: a confirmation first, then the worker runs it.
    stack.fix.touch()
    page.click("#redrive")
    page.wait_for_selector("text=Are you sure?")  # the next page, not the one between
    assert "Are you sure?" in page.content()
    assert stack.app.stats("billing")["dead"] == 1  # nothing happened yet
    page.click("#confirm")
    assert "re-drove 1 message(s)" in page.locator(".notice").inner_text()
    _wait_for(
        lambda: stack.done.exists() and stack.done.read_text() == "1001\n",
        what="the worker running the re-driven message",
    )
    _wait_for(lambda: stack.app.stats("billing")["dead"] == 0, what="no dead letter left")


_DURATION = re.compile(r"(\d+(?:\.\d+)?) (ms|s)")


def _duration(cell: str) -> float:
    """A duration cell read back into seconds ("412 ms", "1.5 s"): a reading of the page
    that does not go through the dashboard's own formatter."""
    match = _DURATION.fullmatch(cell)
    assert match, f"not a duration: {cell!r}"
    return float(match[1]) / (1000 if match[2] == "ms" else 1)


def _close(shown: float, value: float | None) -> bool:
    """`shown` is `value` to the 3 significant digits the page prints."""
    assert value is not None
    return abs(shown - value) <= 0.005 * abs(value) + 1e-6


def _assert_cell(cell: str, quantile: str, hist: Histogram) -> None:
    """`<mean> pNN ≤ <bound>`: the mean to 3 digits, the bound that of the highest bucket
    holding an observation (what p95 of one and p99 of a few come to)."""
    mean, _, top = cell.partition(f" {quantile} ≤ ")
    assert top, f"no {quantile} bound in {cell!r}"
    assert _close(_duration(mean), hist.mean), (cell, hist)
    highest = max(i for i, n in enumerate(hist.counts) if n)
    assert highest < len(hist.bounds), f"an observation above every bucket: {hist}"
    assert _duration(top) == pytest.approx(hist.bounds[highest]), (cell, hist)


def test_reliability_counts_on_the_pages(stack: Stack, page: Any) -> None:
    """Redeliveries, a lost lease, its expiry-to-start time and heartbeat lags, as the
    backend counted them during a scripted run, shown on the queues and queue pages."""
    report = declare_report(stack.app)
    # A worker that dies holding message 2: its lease (the job's 0.6 s) lapses unsettled,
    # and the worker below takes it back as soon as it does.
    crashed = report.enqueue(2)
    [held] = stack.app.backend.lease("reports", 1)
    assert held.id == crashed
    report.enqueue(1)  # fails once: a retry
    stack.app.worker(queues="reports", concurrency=2).run(until_idle=True, timeout=30)
    kept = stack.app.backend.reliability("reports")
    assert kept is not None
    assert (kept.redeliveries, kept.leases_lost, kept.expiry_to_start.count) == (2, 1, 1)
    assert kept.heartbeat_lag.count >= 3  # 3 runs of 0.8 s under a 0.6 s lease

    assert stack.app.stats("reports")["ready"] + stack.app.stats("reports")["delayed"] == 0
    _log_in(page, stack)
    # Drained, the queue stays listed: the dashboard saw it hold messages.
    shown = _counts(page, "tr[data-queue=reports]", "data-reliability")
    assert (shown["redeliveries"], shown["leases_lost"]) == ("2", "1")
    # The one expiry-to-start time: p95 is the bucket it fell in. The heartbeat lags: p99
    # of 3 or more is the bucket of the largest.
    _assert_cell(shown["expiry_to_start"], "p95", kept.expiry_to_start)
    _assert_cell(shown["heartbeat_lag"], "p99", kept.heartbeat_lag)
    page.screenshot(path=str(stack.shots / "queues-reliability.png"), full_page=True)

    page.click("a[href='/queues/reports']")
    on_queue = _counts(page, "#reliability", "data-reliability")
    assert _close(_duration(on_queue.pop("expiry_to_start_mean")), kept.expiry_to_start.mean)
    assert _close(_duration(on_queue.pop("heartbeat_lag_mean")), kept.heartbeat_lag.mean)
    assert on_queue == {
        "redeliveries": "2",
        "leases_lost": "1",
        "expiry_to_start_count": "1",
        "heartbeat_lag_count": str(kept.heartbeat_lag.count),
    }
    for table, hist in (
        ("#expiry-to-start", kept.expiry_to_start),
        ("#heartbeat-lag", kept.heartbeat_lag),
    ):
        cells = page.locator(f"{table} td[data-bucket]")
        assert [int(cells.nth(i).inner_text()) for i in range(cells.count())] == list(hist.counts)
    page.locator("#reliability").scroll_into_view_if_needed()
    page.screenshot(path=str(stack.shots / "reliability.png"), full_page=True)
    if os.environ.get("TASUKI_UPDATE_SCREENSHOT") == "1":
        section = page.locator("#reliability-section")
        section.screenshot(path=str(ROOT / "docs" / "images" / "dashboard-reliability.png"))

    status, body = _request(
        stack.base + "/api/queues", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert status == 200
    assert '"redeliveries":2' in body.replace(" ", "")


def test_purge_asks_first(stack: Stack, page: Any) -> None:
    _, send_email = declare(stack.app)
    send_email.enqueue_many([(i,) for i in range(7)])
    held = stack.app.backend.lease("emails", 2)  # two in flight (no worker runs here)
    _log_in(page, stack)
    page.goto(stack.base + "/queues/emails")
    # the in-flight messages, with attempt, fencing number and lease expiry
    rows = page.locator("#in-flight tbody tr")
    assert rows.count() == 2
    for i, d in enumerate(held):
        text = rows.nth(i).inner_text()
        assert d.id in text and "1 of 10" in text
        assert rows.nth(i).locator("[data-field=job]").inner_text() == "send_email"
        assert f"\t{d.fencing_token}\t" in text
        assert re.search(r"\(in (2\d|30)s\)", text), text  # the job's 30 s lease
    page.click("#purge")
    page.wait_for_selector("text=Are you sure?")  # the next page, not the one between
    assert "Are you sure?" in page.content()
    assert "Delete EVERY message of the queue" in page.content()
    page.screenshot(path=str(stack.shots / "purge-confirm.png"), full_page=True)
    before = stack.app.stats("emails")
    assert (before["ready"], before["in_flight"]) == (5, 2)  # asking changed nothing
    page.click("text=Cancel")
    assert stack.app.stats("emails") | {"oldest_ready_age": 0} == before | {"oldest_ready_age": 0}
    page.click("#purge")
    page.click("#confirm")
    assert "purged 7 message(s)" in page.locator(".notice").inner_text()
    assert stack.app.stats("emails")["ready"] == 0


def test_requests_without_the_token_are_refused(stack: Stack, page: Any) -> None:
    _, send_email = declare(stack.app)
    send_email.enqueue(1)
    assert _request(stack.base + "/api/queues")[0] == 401
    assert _request(stack.base + "/queues/emails")[0] == 401
    wrong = {"Authorization": "Bearer not-the-token"}
    assert _request(stack.base + "/api/queues", headers=wrong)[0] == 401
    status, body = _request(
        stack.base + "/api/queues", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert status == 200 and '"emails"' in body
    # A browser without the session cookie is sent to the login form, and a wrong
    # token does not get in.
    page.goto(stack.base + "/queues/emails")
    assert "/login" in page.url
    page.fill("input[name=token]", "guess")
    page.click("button.primary")
    page.wait_for_selector("text=not the dashboard's token")  # the next page, not the one between
    assert "not the dashboard's token" in page.content()
    assert page.context.cookies() == []


def test_logging_out_ends_the_session(stack: Stack, page: Any) -> None:
    _log_in(page, stack)
    [cookie] = page.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert TOKEN not in cookie["value"]
    page.click("header button:has-text('log out')")
    page.wait_for_url(stack.base + "/login")
    assert page.context.cookies() == []
    # A copy of the cookie kept from before (or stolen) no longer gets in.
    page.context.add_cookies([cookie])
    page.goto(stack.base + "/queues/emails")
    assert "/login" in page.url
    assert (
        _request(stack.base + "/api/queues", headers={"Cookie": f"{COOKIE}={cookie['value']}"})[0]
        == 401
    )
    # Logging in again starts another session; an error page carries the headers too.
    page.context.clear_cookies()
    _log_in(page, stack)
    assert page.context.cookies()[0]["value"] != cookie["value"]
    missing = page.goto(stack.base + "/no/such/page")
    assert missing is not None and missing.status == 404
    assert missing.headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in missing.headers["content-security-policy"]


def test_a_cross_site_post_is_refused(stack: Stack, page: Any) -> None:
    _, send_email = declare(stack.app)
    send_email.enqueue_many([(i,) for i in range(3)])
    _log_in(page, stack)
    page.goto(stack.base + "/queues/emails/confirm?action=purge")
    csrf = page.locator("main input[name=csrf]").get_attribute("value")
    # Another origin (same host, another port: the session cookie is sent along), even
    # holding a leaked CSRF token, cannot make the logged-in browser purge the queue.
    evil = f"""<!doctype html><form id=f method=post
        action="{stack.base}/queues/emails/purge">
        <input name=csrf value="{csrf}"><input name=confirm value=yes></form>
        <script>document.getElementById('f').submit()</script>"""
    with _serve(evil) as evil_url:
        page.goto(evil_url)
        page.wait_for_url(stack.base + "/queues/emails/purge")
        assert "cross-site request refused" in page.content()
    assert stack.app.stats("emails")["ready"] == 3
    # The same form from the dashboard's own page works.
    page.goto(stack.base + "/queues/emails/confirm?action=purge")
    page.click("#confirm")
    assert stack.app.stats("emails")["ready"] == 0


class _serve:
    """A one-page web server on another port: the other origin."""

    def __init__(self, html: str) -> None:
        body = html.encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_failed_flow_its_steps_and_the_redrive_that_resumes_it(stack: Stack, page: Any) -> None:
    fixed = threading.Event()

    @stack.app.job(queue="flows")
    def fetch(n: int) -> int:
        return n * 10

    @stack.app.job(queue="flows", retry=tasuki.Retry(max_attempts=1))
    def parse(value: int) -> int:
        if not fixed.is_set():
            raise ValueError(f"cannot parse {value}")
        return value + 1

    @stack.app.job(queue="flows")
    def store(value: int) -> str:
        return f"stored {value}"

    flow_id = tasuki.chain(fetch.step(4), parse.step(), store.step()).enqueue()
    stack.app.worker(concurrency=2).run(until_idle=True, timeout=30)
    assert stack.app.flow(flow_id).state == "failed"

    _log_in(page, stack)
    page.fill("#find-flow input[name=id]", flow_id)
    page.click("#find-flow button")
    assert page.locator("#flow [data-field=state]").inner_text() == "failed"
    steps = page.locator("#steps tbody tr")
    assert steps.count() == 3
    states = [steps.nth(i).locator("[data-field=state]").inner_text() for i in range(3)]
    assert states[:2] == ["unknown", "dead"] or states[:2] == ["finished", "dead"], states
    assert states[2] == "unknown"  # never enqueued: the chain stopped at the dead step
    assert "ValueError: cannot parse 40" in page.locator("#flow [data-field=error]").inner_text()
    assert "Traceback (most recent call last)" in page.locator("#traceback").inner_text()
    page.screenshot(path=str(stack.shots / "flow.png"), full_page=True)
    # The dead step's own page names its flow and leads back to it.
    page.goto(f"{stack.base}/queues/flows/messages/{flow_id}.1")
    assert page.locator("[data-field=flow]").inner_text() == f"{flow_id}, step 1"
    page.click("[data-field=flow] a")
    assert page.locator("#flow [data-field=state]").inner_text() == "failed"

    # Fixed; the failed step re-driven by clicks resumes the flow where it stopped.
    fixed.set()
    page.click("#redrive-step")
    page.wait_for_selector("text=Are you sure?")  # the next page, not the one between
    assert "Are you sure?" in page.content()
    page.click("#confirm")
    assert "re-drove 1 message(s)" in page.locator(".notice").inner_text()
    stack.app.worker(concurrency=2).run(until_idle=True, timeout=30)
    page.goto(f"{stack.base}/flows/{flow_id}")
    assert page.locator("#flow [data-field=state]").inner_text() == "succeeded"
    assert page.locator("#flow [data-field=result]").inner_text() == '"stored 41"'

    page.goto(f"{stack.base}/flows/no-such-flow")
    assert page.locator("#unknown-flow").count() == 1
