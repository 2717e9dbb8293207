"""The public API: declaring jobs, enqueueing, and the errors bad input gets."""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import tasuki
from tasuki import errors
from tasuki.backends.base import Enqueued, Envelope
from tasuki.backends.memory import MemoryBackend
from tasuki.backends.sqlite import SQLiteBackend
from tasuki.core.codec import PickleSerializer
from tasuki.core.outgoing import Outgoing
from tasuki.middleware.base import EnqueueNext


@pytest.fixture
def app() -> tasuki.App:
    return tasuki.App("memory://")


def test_url_from_argument_env_or_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert isinstance(tasuki.App("memory://").backend, MemoryBackend)
    monkeypatch.setenv("TASUKI_URL", f"sqlite:///{tmp_path / 'env.db'}")
    assert isinstance(tasuki.App().backend, SQLiteBackend)
    monkeypatch.delenv("TASUKI_URL")
    monkeypatch.chdir(tmp_path)
    default = tasuki.App()
    assert default.url == "sqlite:///tasuki.db"
    assert (tmp_path / "tasuki.db").exists()


@pytest.mark.parametrize(
    "url, fragment",
    [
        ("nonsense", "expected scheme://"),
        ("ftp://example.com/q", "unsupported backend URL scheme 'ftp'"),
        ("sqlite://host/x.db", "takes no host"),
        ("sqlite:///", "no database path"),
        ("sqlite:///x.db?colour=blue", "unknown option 'colour'"),
        ("sqlite:///x.db?busy_timeout=soon", "bad value 'soon'"),
        ("sqlite:///:memory:", "memory://"),
    ],
)
def test_invalid_urls_name_the_problem(url: str, fragment: str) -> None:
    with pytest.raises(errors.InvalidURL, match=fragment):
        tasuki.App(url)


def test_unopenable_database_path(tmp_path: Path) -> None:
    with pytest.raises(errors.BackendUnavailable, match="cannot open SQLite database"):
        tasuki.App(f"sqlite:///{tmp_path / 'no' / 'such' / 'dir' / 'x.db'}")


def test_every_error_derives_from_the_root() -> None:
    for name in dir(errors):
        obj = getattr(errors, name)
        if (
            inspect.isclass(obj)
            and issubclass(obj, Exception)
            and obj.__module__ == errors.__name__
        ):
            assert issubclass(obj, tasuki.TasukiError), name
    assert tasuki.errors is errors


def test_job_is_still_callable(app: tasuki.App) -> None:
    @app.job
    def double(x: int) -> int:
        return 2 * x

    assert double(4) == 8
    assert double.name == "double"
    assert double.queue == "default"
    assert app.get_job("double") is double


def test_all_design_options_are_accepted_and_stored(app: tasuki.App) -> None:
    def handler(message: tasuki.Message, error: BaseException) -> None: ...

    retry = tasuki.Retry(
        max_attempts=5,
        backoff=tasuki.exponential(base=1.0, cap=300.0),
        on=(TimeoutError,),
        give_up_on=(ValueError,),
    )
    unique = tasuki.Unique(mode="until_and_while_executing", ttl=60)

    @app.job(
        queue="images",
        retry=retry,
        timeout=60.0,
        visibility_timeout=30.0,
        dedup=True,
        unique=unique,
        on_exhausted=handler,
    )
    def resize(image_id: int) -> None: ...

    assert resize.queue == "images"
    assert resize.retry is retry
    assert (resize.timeout, resize.visibility_timeout) == (60.0, 30.0)
    assert resize.dedup == tasuki.Dedup()
    assert resize.unique is unique
    assert resize.on_exhausted is handler


def test_enqueue_options_and_idempotent_ids(app: tasuki.App) -> None:
    @app.job
    def resize(image_id: int) -> None: ...

    first = resize.options(message_id="img-42").enqueue(42)
    again = resize.options(message_id="img-42").enqueue(42)
    assert first == again == "img-42"
    resize.options(delay=10.0, queue="images").enqueue(1)
    eta = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30)
    resize.options(eta=eta).enqueue(2)
    assert app.stats("default") == {
        "ready": 1,
        "in_flight": 0,
        "delayed": 1,
        "dead": 0,
        "oldest_ready_age": pytest.approx(0, abs=1),
    }
    assert app.stats("images")["delayed"] == 1
    ids = resize.enqueue_many([(1,), (2,), (3,)])
    assert len(set(ids)) == 3
    assert app.stats("default")["ready"] == 4


def test_an_id_the_producer_made_is_marked_generated(
    app: tasuki.App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only an id made for this enqueue is `id_generated`: SQS deletes a second copy of
    such a message met after its ack (a send retried after its reply was lost), which a
    given id may legitimately be."""
    stored: list[Envelope] = []
    enqueue = app.backend.enqueue

    def recorded(envelopes: Sequence[Envelope], *args: Any) -> list[Enqueued]:
        stored.extend(envelopes)
        return enqueue(envelopes, *args)

    monkeypatch.setattr(app.backend, "enqueue", recorded)

    @app.job
    def resize(image_id: int) -> None: ...

    resize.enqueue(1)
    resize.enqueue_many([(2,), (3,)])
    resize.options(message_id="img-4").enqueue(4)
    app.send("raw", b"x")
    app.send("raw", b"x", message_id="raw-1")
    assert [e.id_generated for e in stored] == [True, True, True, False, True, False]

    class OwnIds(tasuki.Middleware):
        """A client middleware that gives messages ids of its own (idempotency keys)."""

        def enqueue(self, messages: list[Outgoing], call_next: EnqueueNext) -> list[Enqueued]:
            for m in messages:
                m.id = f"order-{m.args[0]}"
            return call_next(messages)

    app.middleware.append(OwnIds())
    del stored[:]
    resize.enqueue(5)  # its id is the middleware's now, not the one the producer made
    assert [(e.id, e.id_generated) for e in stored] == [("order-5", False)]


def test_wrong_arguments_are_refused_at_enqueue(app: tasuki.App) -> None:
    @app.job
    def resize(image_id: int) -> None: ...

    with pytest.raises(errors.InvalidArgument, match="wrong arguments for job 'resize'"):
        resize.enqueue(1, 2)
    with pytest.raises(errors.InvalidArgument):
        resize.enqueue(colour="red")
    with pytest.raises(errors.InvalidArgument):
        resize.enqueue()
    assert app.stats()["ready"] == 0


def test_argument_counts_defaults_and_keywords(app: tasuki.App) -> None:
    """Plain signatures are checked by counting positional arguments; the rest bind."""

    @app.job
    def crop(image_id: int, width: int = 10, /) -> None: ...

    @app.job
    def tag(image_id: int, *, label: str) -> None: ...

    crop.enqueue(1)
    crop.enqueue(1, 2)
    with pytest.raises(errors.InvalidArgument):
        crop.enqueue(1, 2, 3)
    with pytest.raises(errors.InvalidArgument):
        crop.enqueue(image_id=1)  # positional-only
    tag.enqueue(1, label="x")
    with pytest.raises(errors.InvalidArgument):
        tag.enqueue(1)
    with pytest.raises(errors.InvalidArgument):
        tag.enqueue(1, "x")
    assert app.stats()["ready"] == 3


def test_unserializable_arguments_name_the_culprit(app: tasuki.App) -> None:
    @app.job
    def store(a: object, b: object) -> None: ...

    with pytest.raises(errors.SerializationError, match=r"argument 1, of type set"):
        store.enqueue(1, {1, 2})
    with pytest.raises(errors.SerializationError, match=r"argument 'b', of type object"):
        store.enqueue(a=1, b=object())
    assert app.stats()["ready"] == 0


def test_oversized_message_is_refused_and_batch_is_all_or_nothing(tmp_path: Path) -> None:
    app = tasuki.App(f"sqlite:///{tmp_path / 'big.db'}", max_message_size=10_000)

    @app.job
    def upload(data: str) -> None: ...

    upload.enqueue("small")
    with pytest.raises(errors.MessageTooLarge, match="the limit is 10,000 bytes"):
        upload.enqueue_many([("ok",), ("x" * 20_000,)])
    assert app.stats()["ready"] == 1


@pytest.mark.parametrize("delay", [-1, float("nan"), float("inf"), "soon", True])
def test_bad_delays(app: tasuki.App, delay: object) -> None:
    @app.job
    def j() -> None: ...

    with pytest.raises(errors.InvalidArgument, match="delay"):
        j.options(delay=delay).enqueue()  # type: ignore[arg-type]


def test_bad_job_declarations(app: tasuki.App) -> None:
    with pytest.raises(errors.ConfigurationError, match="unknown job option"):
        app.job(colour="red")(lambda: None)
    with pytest.raises(errors.InvalidArgument, match=r"retry must be a tasuki\.Retry"):
        app.job(retry=3)(lambda: None)
    with pytest.raises(errors.InvalidArgument, match="visibility_timeout"):
        app.job(visibility_timeout=0)(lambda: None)

    @app.job
    def twice() -> None: ...

    with pytest.raises(errors.ConfigurationError, match="already registered"):
        app.job(name="twice")(lambda: None)
    with pytest.raises(errors.InvalidArgument, match="queue"):
        app.job(queue="")(lambda: None)


def test_bad_policies() -> None:
    with pytest.raises(errors.InvalidArgument):
        tasuki.Retry(max_attempts=0)
    with pytest.raises(errors.InvalidArgument):
        tasuki.Retry(on=("ValueError",))  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidArgument):
        tasuki.Unique(mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidArgument):
        tasuki.Unique(on_conflict="panic")  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidArgument):
        tasuki.Dedup(window=0)
    with pytest.raises(errors.InvalidArgument):
        tasuki.exponential(factor=0.5)


def test_send_raw_messages(app: tasuki.App) -> None:
    msg_id = app.send("s3-events", b'{"Records": []}', delay=0)
    assert app.stats("s3-events")["ready"] == 1
    assert app.send("s3-events", b"x", message_id=msg_id) == msg_id
    with pytest.raises(errors.InvalidArgument):
        app.send("s3-events", 42)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidArgument):
        app.send("s3-events", b"x", headers={"n": 1})  # type: ignore[dict-item]


def test_unknown_job_lookup(app: tasuki.App) -> None:
    with pytest.raises(errors.UnknownJob):
        app.get_job("nope")


def test_pickle_without_a_signing_key_is_refused_unless_allowed(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    url = f"sqlite:///{db}"
    for serializer in ("pickle", PickleSerializer()):
        with pytest.raises(errors.ConfigurationError, match="allow_unsigned_pickle=True"):
            tasuki.App(url, serializer=serializer)
        with pytest.raises(errors.ConfigurationError, match="signing_key"):
            tasuki.App(url, serializer=serializer, signing_key="")
    assert not db.exists()  # refused before anything was opened
    signed = tasuki.App(url, serializer="pickle", signing_key="key")
    unsigned = tasuki.App(url, serializer="pickle", allow_unsigned_pickle=True)
    assert signed.codec.serializer.content_type == unsigned.codec.serializer.content_type
    assert tasuki.App(url, allow_unsigned_pickle=True).codec.serializer.content_type == "json"
    signed.close()
    unsigned.close()


def test_pickle_only_by_name(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    producer = tasuki.App(url, serializer="pickle", allow_unsigned_pickle=True)
    consumer = tasuki.App(url)
    ran: list[object] = []

    @producer.job
    def p(x: object) -> None: ...

    @consumer.job(name="p")
    def c(x: object) -> None:
        ran.append(x)

    p.enqueue({1, 2})  # a set: pickle can, JSON cannot
    consumer.worker().run(until_idle=True, timeout=10)
    assert ran == []
    [dead] = consumer.dead_letters()
    assert "does not enable" in str(dead.error)
    with pytest.raises(errors.ConfigurationError):
        tasuki.App("memory://", serializer="yaml")


# Declarations only: they never touch a backend, so they run once, on memory://.
def test_default_retry_is_safe(app: tasuki.App) -> None:
    @app.job
    def plain() -> None: ...

    assert plain.retry.max_attempts == 10
    assert plain.retry.retries(RuntimeError())


def test_wrong_job_timeout_type_is_rejected(app: tasuki.App) -> None:
    with pytest.raises(tasuki.errors.InvalidArgument):

        @app.job(timeout=-1)
        def bad() -> None: ...
