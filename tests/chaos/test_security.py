"""Security promises: pickle only by name, signatures that bind body, job and queue,
and passwords never shown (logs, errors, CLI output, repr)."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path

import pytest
from click.testing import CliRunner

import tasuki
from tasuki.backends.base import Settle
from tasuki.backends.urls import backend_from_url, redact
from tasuki.cli.main import cli
from tasuki.errors import ConfigurationError, InvalidURL, TasukiError
from tasuki.testing.servers import RedisServer

SECRET = "s3cr3t-Pa55"


class _Touch:
    """Unpickling this creates a file: proof that a pickle was loaded."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return (os.mkdir, (str(self.path),))


# -- pickle --------------------------------------------------------------------------------
def test_pickle_is_never_the_default_and_only_enabled_by_name(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    assert tasuki.App(url).codec.serializer.content_type == "json"
    with pytest.raises(ConfigurationError):
        tasuki.App(url, serializer="Pickle")  # the exact name, nothing close to it

    app = tasuki.App(url)
    ran: list[object] = []

    @app.job
    def work(n: object) -> None:
        ran.append(n)

    proof = tmp_path / "unpickled"
    evil = pickle.dumps({"args": [_Touch(proof)], "kwargs": {}})
    pickle.loads(evil)  # the proof works: loading it makes the directory
    assert proof.is_dir()
    proof.rmdir()
    app.send("default", evil, headers={"tasuki-job": "work", "tasuki-content-type": "pickle"})
    app.worker(concurrency=1).run(until_idle=True, timeout=30)
    assert not proof.exists(), "a JSON app loaded a pickle"
    assert ran == []
    [dead] = app.dead_letters()
    assert dead.reason == "undecodable message"
    assert "pickle" in str(dead.error)

    named = tasuki.App(url, serializer="pickle", signing_key=b"key")
    got: list[object] = []

    @named.job
    def roundtrip(value: object) -> None:
        got.append(value)

    roundtrip.enqueue({1, 2})  # a set: only pickle carries it
    named.worker(concurrency=1).run(until_idle=True, timeout=30)
    assert got == [{1, 2}]


# -- signatures --------------------------------------------------------------------------------
def test_tampered_unsigned_and_replayed_messages_are_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    app = tasuki.App(url, signing_key=b"key")
    sender = tasuki.App(url)  # sends raw bytes and headers, unsigned
    paid: list[tuple[str, int]] = []

    @app.job(queue="payments")
    def pay(who: str, cents: int) -> None:
        paid.append((who, cents))

    @app.job(queue="refunds", name="refund")
    def refund(who: str, cents: int) -> None:
        paid.append((who, -cents))

    pay.enqueue("alice", 100)
    # Capture the genuine message as a worker would see it, then put it back untouched.
    [d] = app.backend.lease("payments", 1, 30.0)
    headers, body = dict(d.headers), d.body
    app.backend.settle([Settle.release(d.receipt, 0.0, penalty=False)])
    assert "tasuki-signature" in headers

    tampered = body.replace(b"100", b"999")
    assert tampered != body
    sender.send("payments", tampered, headers=headers)  # body changed, signature kept
    unsigned = {k: v for k, v in headers.items() if k != "tasuki-signature"}
    sender.send("payments", body, headers=unsigned)
    sender.send("refunds", body, headers=headers)  # a genuine message, on another queue
    sender.send("refunds", body, headers={**headers, "tasuki-job": "refund"})

    app.worker(queues=["payments", "refunds"], concurrency=2).run(until_idle=True, timeout=30)
    assert paid == [("alice", 100)]
    dead = app.dead_letters("payments") + app.dead_letters("refunds")
    assert len(dead) == 4
    assert {x.reason for x in dead} == {"refused: bad signature"}


# -- passwords -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "url",
    [
        f"redis://user:{SECRET}@127.0.0.1:1/0?bogus=1",
        f"redis://:{SECRET}@127.0.0.1:99999/0",
        f"redis://:{SECRET}@h/0?socket_timeout=x",
        f"rediss://:{SECRET}@h/abc",
        f"redis://u:{SECRET}@[::1/0",
        f"foo://u:{SECRET}@h",
        f"postgresql://u:{SECRET}@h/db?bogus=1",
        f"redis://u:{SECRET}@h/0?cluster=yes&db=3",
        f"sqs://eu-west-1?aws_secret_access_key={SECRET}&bogus=1",
    ],
)
def test_errors_never_show_the_password(url: str) -> None:
    try:
        backend = backend_from_url(url)
    except TasukiError as exc:
        assert SECRET not in str(exc)
        assert SECRET not in repr(exc)
        assert isinstance(exc, InvalidURL)
    else:
        assert SECRET not in repr(backend) and SECRET not in backend.url
        backend.close()


def test_redact_hides_passwords_and_secret_options() -> None:
    assert redact(f"redis://u:{SECRET}@h:1/0") == "redis://u:***@h:1/0"
    assert redact(f"redis://:{SECRET}@h") == "redis://:***@h"
    assert redact(f"redis://u:p@ss{SECRET}@h/0") == "redis://u:***@h/0"  # an unescaped @
    assert redact("redis://h:6379/0") == "redis://h:6379/0"
    assert redact(f"sqs://x?aws_secret_access_key={SECRET}&prefix=p") == (
        "sqs://x?aws_secret_access_key=***&prefix=p"
    )
    # a lock store's URL inside the SQS URL, and PostgreSQL's listen_url
    assert SECRET not in redact(f"sqs://eu-west-1?prefix=p-&locks=redis://:{SECRET}@cache:6379/1")
    assert SECRET not in redact(
        f"postgresql://u:{SECRET}@db/jobs?listen_url=postgresql://u:{SECRET}@db:5432/jobs"
    )
    # too broken to parse (a port that is no number), nested and all
    assert SECRET not in redact(f"sqs://x?locks=redis://:{SECRET}@h:notaport/0&api_key={SECRET}")


def test_repr_logs_and_cli_never_show_the_password(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with RedisServer(tmp_path / "redis", extra=["--requirepass", SECRET]) as server:
        good = f"redis://:{SECRET}@127.0.0.1:{server.port}/0"
        wrong = f"redis://:not-{SECRET}@127.0.0.1:{server.port}/0"
        app = tasuki.App(good)
        assert SECRET not in repr(app) and SECRET not in repr(app.backend)

        @app.job
        def work() -> None: ...

        work.enqueue()
        caplog.set_level(logging.DEBUG, logger="tasuki")
        app.worker(concurrency=1).run(until_idle=True, timeout=30)
        assert caplog.records, "the worker logged nothing: the check below would prove nothing"

        bad = tasuki.App(wrong)
        with pytest.raises(TasukiError) as refused:
            bad.stats()
        assert "credentials" in str(refused.value) and SECRET not in str(refused.value)
        bad.worker(concurrency=1).run(timeout=1.0)  # it logs that leasing fails
        assert any("leasing" in r.getMessage() for r in caplog.records)
        assert SECRET not in caplog.text

        runner = CliRunner()
        for args in (
            ["stats", "--url", good],
            ["stats", "--url", wrong],
            ["stats", "--json", "--url", good],
        ):
            result = runner.invoke(cli, args)
            assert SECRET not in result.output, (args, result.output)
        unreachable = runner.invoke(cli, ["stats", "--url", f"redis://:{SECRET}@127.0.0.1:1/0"])
        assert unreachable.exit_code != 0 and SECRET not in unreachable.output
        app.close()
        bad.close()
