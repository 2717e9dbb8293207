"""The integration examples of the docs run: a FastAPI app and a Django project, each with
a real worker process beside it."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.deps import need
from tests.support.processes import env_with_src

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _env(url: str) -> dict[str, str]:
    env = env_with_src()
    env["PYTHONPATH"] = os.pathsep.join([str(EXAMPLES), env["PYTHONPATH"]])
    env["TASUKI_URL"] = url
    env["PYTHONUNBUFFERED"] = "1"  # the job's prints reach the log as they happen
    return env


def _wait_for(predicate: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.fixture
def shop_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'shop.db'}"


@pytest.fixture
def fastapi_shop(monkeypatch: pytest.MonkeyPatch, shop_url: str) -> Iterator[object]:
    """The example's modules, imported fresh on this test's database."""
    need("fastapi")
    monkeypatch.setenv("TASUKI_URL", shop_url)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    for name in ("fastapi_shop.api", "fastapi_shop.tasks", "fastapi_shop"):
        sys.modules.pop(name, None)
    api = importlib.import_module("fastapi_shop.api")
    yield api
    api.app.close()
    for name in ("fastapi_shop.api", "fastapi_shop.tasks", "fastapi_shop"):
        sys.modules.pop(name, None)


def test_fastapi_enqueues_from_a_request_and_a_worker_runs_it(
    fastapi_shop: object, shop_url: str, tmp_path: Path
) -> None:
    from fastapi.testclient import TestClient

    client = TestClient(fastapi_shop.api)  # type: ignore[attr-defined]
    first = client.post("/images/42/thumbnail?size=64", headers={"Idempotency-Key": "img-42"})
    assert first.status_code == 202, first.text
    assert first.json() == {"message_id": "img-42"}
    again = client.post("/images/42/thumbnail?size=64", headers={"Idempotency-Key": "img-42"})
    assert again.json() == {"message_id": "img-42"}  # a retried request: no twin
    other = client.post("/images/7/thumbnail").json()["message_id"]
    assert len(other) == 32
    assert client.get("/queues/thumbnails").json()["ready"] == 2

    log = tmp_path / "worker.out"
    with log.open("w") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "tasuki", "worker", "fastapi_shop.tasks:app", "-c", "2"],
            cwd=EXAMPLES,
            env=_env(shop_url),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            _wait_for(lambda: client.get("/queues/thumbnails").json()["ready"] == 0)
            _wait_for(lambda: client.get("/queues/thumbnails").json()["in_flight"] == 0)
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(30) == 0
    output = log.read_text()
    assert output.count("thumbnail 64px of image 42 (attempt 1)") == 1, output
    assert "thumbnail 128px of image 7 (attempt 1)" in output, output


DJANGO = EXAMPLES / "django_shop"
CLIENT = """
import os, django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")
django.setup()
from django.test import Client
client = Client()
for _ in range(2):  # the button pressed twice: one confirmation
    response = client.post("/orders/7/confirm")
    print(response.status_code, response.json()["message_id"])
print(client.get("/orders/7/confirm").status_code)
"""


def _django_env(url: str) -> dict[str, str]:
    env = env_with_src()
    env["PYTHONPATH"] = os.pathsep.join([str(DJANGO), env["PYTHONPATH"]])
    env["TASUKI_URL"] = url
    env["DJANGO_SETTINGS_MODULE"] = "shop.settings"
    env["PYTHONWARNINGS"] = "error"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def test_django_view_enqueues_and_the_management_command_runs_the_worker(
    shop_url: str, tmp_path: Path
) -> None:
    need("django")
    env = _django_env(shop_url)
    client = subprocess.run(
        [sys.executable, "-c", CLIENT],
        cwd=DJANGO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert client.returncode == 0, client.stderr
    assert client.stdout.splitlines() == ["202 confirm-7", "202 confirm-7", "405"]

    log = tmp_path / "worker.out"
    with log.open("w") as out:
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "tasuki_worker", "-c", "2", "--grace", "5"],
            cwd=DJANGO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            _wait_for(lambda: "confirmation mail for order 7" in log.read_text())
            _wait_for(lambda: "finished" in log.read_text())
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(30) == 0, log.read_text()
    output = log.read_text()
    assert output.count("confirmation mail for order 7 (attempt 1)") == 1, output
    assert "Traceback" not in output


def test_django_worker_until_idle(shop_url: str) -> None:
    need("django")
    env = _django_env(shop_url)
    enqueue = "import django; django.setup(); from orders.tasks import send_confirmation as s; "
    enqueue += "s.enqueue(1); s.enqueue(2)"
    subprocess.run([sys.executable, "-c", enqueue], cwd=DJANGO, env=env, check=True, timeout=60)
    result = subprocess.run(
        [sys.executable, "manage.py", "tasuki_worker", "--until-idle"],
        cwd=DJANGO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for order in (1, 2):
        assert f"confirmation mail for order {order} (attempt 1)" in result.stdout


def test_getting_started_app_with_a_worker_process(tmp_path: Path) -> None:
    env = _env(f"sqlite:///{tmp_path / 'myapp.db'}")
    produced = subprocess.run(
        [sys.executable, "myapp.py", "42"],
        cwd=EXAMPLES,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert produced.returncode == 0, produced.stderr
    assert produced.stdout.splitlines()[1] == "welcome-42"
    cli = [sys.executable, "-m", "tasuki"]
    enq = subprocess.run(
        [*cli, "enqueue", "resize", "7", "--kwargs", '{"width": 100}', "--app", "myapp:app"],
        cwd=EXAMPLES,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert enq.returncode == 0, enq.stderr
    log = tmp_path / "worker.out"
    with log.open("w") as out:
        worker = subprocess.Popen(
            [*cli, "worker", "myapp:app", "-c", "4"],
            cwd=EXAMPLES,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            _wait_for(lambda: log.read_text().count("finished") >= 3)
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(30) == 0, log.read_text()
    output = log.read_text()
    for line in (
        "resized image 42 to 400px",
        "resized image 7 to 100px",
        "welcome mail to user 42 (attempt 1)",
    ):
        assert line in output, output
