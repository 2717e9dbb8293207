"""What only the PostgreSQL backend has: migrations, its URL, LISTEN/NOTIFY wake-ups."""

from __future__ import annotations

import threading
import time
import uuid

import psycopg
import pytest
from click.testing import CliRunner

from tasuki import errors
from tasuki.backends.base import Delivery, Envelope, Settle
from tasuki.backends.postgres import PostgresBackend, from_url
from tasuki.backends.postgres.schema import migrations
from tasuki.cli.main import cli
from tasuki.testing.servers import PostgresServer


@pytest.fixture
def url(postgres_server: PostgresServer) -> str:
    return postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")


def _applied(url: str) -> list[int]:
    schema = url.rsplit("schema=", 1)[1]
    base = url.split("?", 1)[0]
    with psycopg.connect(base) as conn:
        rows = conn.execute(f'SELECT version FROM "{schema}".tasuki_migrations').fetchall()
    return sorted(row[0] for row in rows)


def test_concurrent_first_use_migrates_once(url: str) -> None:
    backends: list[PostgresBackend] = []
    failures: list[BaseException] = []

    def start() -> None:
        try:
            backend = from_url(url)
            backends.append(backend)
            backend.stats("q")  # the first use migrates
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not failures
    assert _applied(url) == [version for version, _, _ in migrations()]
    for b in backends:
        b.close()


def test_migrate_false_and_the_cli_command(url: str) -> None:
    backend = from_url(f"{url}&migrate=false")
    with pytest.raises(errors.BackendError, match="tasuki_messages"):
        backend.enqueue([Envelope("q", "a", b"x")])
    runner = CliRunner()
    first = runner.invoke(cli, ["migrate", "--url", url])
    assert first.exit_code == 0, first.output
    assert f"applied {len(migrations())} migration" in first.output
    again = runner.invoke(cli, ["migrate", "--url", url])
    assert again.exit_code == 0 and "up to date" in again.output
    assert backend.enqueue([Envelope("q", "a", b"x")])[0].status == "enqueued"
    backend.close()


def test_the_password_is_never_shown(postgres_server: PostgresServer) -> None:
    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}").replace(
        "postgres@", "postgres:hunter2@"
    )
    backend = from_url(url)
    assert "hunter2" not in backend.url and ":***@" in backend.url
    backend.close()
    with pytest.raises(errors.InvalidURL, match="bogus"):
        from_url(f"{url}&bogus=1").ping()  # libpq's verdict, at the first connection
    with pytest.raises(errors.InvalidURL, match="pool_size"):
        from_url(f"{url}&pool_size=many")


def test_an_idle_leaser_wakes_on_notify(url: str) -> None:
    consumer, producer = from_url(url), from_url(url)
    consumer.lease("q", 1, wait=0.01)  # the listener is up before the clock starts
    got: list[Delivery] = []
    waited: list[float] = []

    def lease() -> None:
        start = time.monotonic()
        got.extend(consumer.lease("q", 1, 30.0, wait=10.0))
        waited.append(time.monotonic() - start)

    t = threading.Thread(target=lease)
    t.start()
    time.sleep(0.3)
    sent = time.monotonic()
    producer.enqueue([Envelope("q", "a", b"x")])
    t.join(15)
    assert [d.id for d in got] == ["a"]
    assert waited[0] < 5.0
    woke_after = time.monotonic() - sent
    assert woke_after < 0.2, f"woken {woke_after * 1000:.0f} ms after the commit"
    consumer.close()
    producer.close()


def test_lost_notification_session_falls_back_to_polling(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    consumer, producer = from_url(url), from_url(url)
    consumer.lease("q", 1, wait=0.01)
    base = url.split("?", 1)[0]
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND query LIKE 'LISTEN%%'",
            (consumer.postgres.application_name,),
        )
    deadline = time.monotonic() + 5
    while not any("polling" in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline, "no log line for the lost session"
        time.sleep(0.02)
    producer.enqueue([Envelope("q", "a", b"x")])
    assert [d.id for d in consumer.lease("q", 1, 30.0, wait=5.0)] == ["a"]
    consumer.close()
    producer.close()


def test_a_listener_session_that_fails_with_any_error_reconnects(
    url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only psycopg's errors: the thread that died of another one left every wait
    asleep until its timeout, a worker that looked idle with work waiting."""
    real = psycopg.connect
    failed: list[str] = []

    def connect(*args: object, **kwargs: object) -> object:
        if threading.current_thread().name == "tasuki-postgres-listen" and not failed:
            failed.append("once")
            raise RuntimeError("not a psycopg error")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(psycopg, "connect", connect)
    consumer, producer = from_url(url), from_url(url)
    consumer.lease("q", 1, wait=0.01)
    deadline = time.monotonic() + 10
    while not consumer.postgres.listener._listening:
        assert time.monotonic() < deadline, "the listener never came back"
        time.sleep(0.05)
    assert failed and any("not a psycopg error" in r.getMessage() for r in caplog.records)
    sent = time.monotonic()
    threading.Timer(0.3, lambda: producer.enqueue([Envelope("q", "a", b"x")])).start()
    assert [d.id for d in consumer.lease("q", 1, 30.0, wait=10.0)] == ["a"]
    assert time.monotonic() - sent < 5.0
    consumer.close()
    producer.close()


def test_a_plain_enqueue_is_one_statement_that_wakes_the_listeners(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One message or a plain batch: one statement in autocommit inserts and notifies (no
    BEGIN, id look-up, NOTIFY and COMMIT of their own); duplicates stay duplicates. A
    batch without caller-given ids (keep_id 0) that meets a stored id takes a second
    statement: the first, `insert_batch_new`, fails as a whole and changes nothing."""
    consumer, producer = from_url(url), from_url(url)
    producer.enqueue([Envelope("q", "warm", b"x", keep_id=60.0)])  # migrations, clean-up
    [warm] = consumer.lease("q", 1, wait=0.01)  # and the listener is up
    assert consumer.ack([warm.receipt]) == [True]
    main = threading.get_ident()
    sent: list[object] = []
    execute = psycopg.Connection.execute

    def counting(self: psycopg.Connection[object], query: object, *args: object) -> object:
        if threading.get_ident() == main and query != "":  # "": the pool's idle check
            sent.append(query)
        return execute(self, query, *args)  # type: ignore[arg-type]

    def no_transaction(*args: object, **kwargs: object) -> object:
        raise AssertionError("a transaction of the backend's own")

    monkeypatch.setattr(psycopg.Connection, "execute", counting)
    monkeypatch.setattr(psycopg.Connection, "transaction", no_transaction)
    for envelopes, statuses, statements in [
        ([Envelope("q", "a", b"x")], ["enqueued"], 1),
        ([Envelope("q", "b", b"x"), Envelope("r", "c", b"y")], ["enqueued", "enqueued"], 1),
        ([Envelope("q", "warm", b"x")], ["duplicate"], 1),  # remembered as finished
        ([Envelope("q", "a", b"x"), Envelope("q", "warm", b"x")], ["duplicate"] * 2, 2),
        ([Envelope("q", "a", b"x", keep_id=60.0)], ["duplicate"], 1),
    ]:
        sent.clear()
        hint = consumer.postgres.wait_hint()
        assert [r.status for r in producer.enqueue(envelopes)] == statuses
        assert len(sent) == statements
        started = time.monotonic()
        consumer.postgres.wait("q", 2.0, hint)
        woken = time.monotonic() - started < 1.0
        assert woken == ("enqueued" in statuses), "notified exactly when something was stored"
    monkeypatch.undo()
    assert sorted(d.id for d in consumer.lease("q", 10)) == ["a", "b"]
    assert [d.id for d in consumer.lease("r", 10)] == ["c"]
    consumer.close()
    producer.close()


def test_a_batch_of_new_ids_that_meets_a_stored_one_stores_the_others_once(url: str) -> None:
    """The fast statement fails on the stored id; the fallback stores the rest, once."""
    backend = from_url(url)
    backend.enqueue([Envelope("q", "x", b"1")])
    results = backend.enqueue([Envelope("q", i, b"2") for i in ("y", "x", "z")])
    assert [r.status for r in results] == ["enqueued", "duplicate", "enqueued"]
    leased = {d.id: d.body for d in backend.lease("q", 10)}
    assert leased == {"x": b"1", "y": b"2", "z": b"2"}
    backend.close()


def test_a_plain_enqueue_in_the_callers_transaction_is_announced_on_commit(url: str) -> None:
    consumer, producer = from_url(url), from_url(url)
    consumer.lease("q", 1, wait=0.01)  # migrations; the listener is up
    base = url.split("?", 1)[0]
    with psycopg.connect(base) as conn:
        hint = consumer.postgres.wait_hint()
        results = producer.enqueue([Envelope("q", "a", b"x")], connection=conn)
        assert [r.status for r in results] == ["enqueued"]
        started = time.monotonic()
        consumer.postgres.wait("q", 0.5, hint)
        assert time.monotonic() - started >= 0.45, "announced before the commit"
        assert consumer.lease("q", 1) == []
        conn.commit()
        started = time.monotonic()
        consumer.postgres.wait("q", 5.0, hint)
        assert time.monotonic() - started < 1.0, "not announced on commit"
    assert [d.id for d in consumer.lease("q", 1)] == ["a"]
    consumer.close()
    producer.close()


def test_a_connection_given_back_is_ready_at_once_in_the_callers_thread(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hot path's connections go back to the pool in the thread that used them: no
    task for psycopg_pool's maintenance thread (a queue put and a thread woken per lease
    and per settle), and the next use within the idle window runs no check query."""
    backend = from_url(url)
    backend.enqueue([Envelope("q", "warm", b"x")])  # migrations, the pool opened
    [d] = backend.lease("q", 1)  # its connection used once since
    assert backend.settle([Settle.release(d.receipt, penalty=False)]) == [True]
    pool = backend.postgres.pool()
    tasks: list[object] = []
    run_task = type(pool).run_task

    def counting(self: object, task: object) -> None:
        tasks.append(task)
        run_task(self, task)  # type: ignore[arg-type]

    monkeypatch.setattr(type(pool), "run_task", counting)
    sent: list[object] = []
    execute = psycopg.Connection.execute

    def recording(self: psycopg.Connection[object], query: object, *args: object) -> object:
        sent.append(query)
        return execute(self, query, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(psycopg.Connection, "execute", recording)
    for _ in range(5):
        [d] = backend.lease("q", 1)
        assert pool.get_stats()["pool_available"] >= 1, "given back before the call returned"
        assert backend.settle([Settle.release(d.receipt, penalty=False)]) == [True]
    monkeypatch.undo()
    assert tasks == []
    assert "" not in sent, "an idle check on a connection just given back"
    backend.close()
