"""Fuzzed inputs: only clean `TasukiError`s (or click usage errors), or dead letters with
a reason. Never a crash, never a dead worker loop, never a lost message.

Hypothesis draws the inputs; `corpus.py` keeps the nastiest ones found as fixed cases.
"""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tasuki
from tasuki.backends.base import Envelope
from tasuki.backends.urls import backend_from_url
from tasuki.cli.main import cli
from tasuki.core import headers as tasuki_headers
from tasuki.core.codec import Codec
from tasuki.core.job import check_headers
from tasuki.core.message import new_id
from tasuki.core.periodic import Periodic
from tasuki.errors import InvalidArgument, SerializationError, SignatureError, TasukiError
from tests.chaos import corpus

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Every `tasuki-*` header a worker reads, and one it does not know (a newer producer's).
TASUKI_HEADERS = [*tasuki_headers.RULES, "tasuki-from-the-future"]
# What a hostile writer puts in them: numbers no time is, names no job has, any script.
HOSTILE_VALUES = [
    *("nan", "NaN", "-nan", "inf", "-inf", "+Infinity", "1e400", "-1e400", "-1", "-0.0"),
    *("0", "1e11", "1e12", "9" * 400, "0x10", "1_000", "١٢٣", "٣", "¼", "Ⅻ"),
    *("", " ", "\t", "None", "null", "true", "[]", "{}", '{"f": 1}', '{"t": {}}'),
    *("ünïcode", "日本語", "😀" * 10, "\u2028", "\u202e", "a\nb", "x" * 5000, "1" * 70_000),
    *("\x00", "a\x00b", "\ud800", "lone \udfff", "0" * 64, "f" * 64, "F" * 64, "1"),
]
header_text = st.text(max_size=30) | st.sampled_from(HOSTILE_VALUES)
headers = st.dictionaries(
    st.sampled_from([*TASUKI_HEADERS, "x"]) | header_text,
    header_text,
    max_size=4,
)
json_ish = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)
bodies = st.binary(max_size=200) | json_ish.map(lambda v: repr(v).encode())


# -- decoding and signatures ------------------------------------------------------------
@FUZZ
@given(headers=headers, body=bodies)
def test_decode_payload_returns_args_or_raises_serialization_error(
    headers: dict[str, str], body: bytes
) -> None:
    try:
        args, kwargs = Codec().decode_payload(headers, body)
    except SerializationError:
        return
    assert isinstance(args, tuple) and isinstance(kwargs, dict)


@FUZZ
@given(headers=headers, body=bodies, queue=st.text(min_size=1, max_size=20))
def test_verify_refuses_anything_not_signed_with_the_key(
    headers: dict[str, str], body: bytes, queue: str
) -> None:
    codec = Codec(signing_key=b"k")
    with pytest.raises(SignatureError):
        codec.verify(queue, headers, body)


@FUZZ
@given(
    job=st.text(max_size=20),
    body=st.binary(max_size=100),
    queue=st.text(min_size=1, max_size=20),
    flip=st.integers(min_value=0),
)
def test_any_tampered_byte_breaks_the_signature(
    job: str, body: bytes, queue: str, flip: int
) -> None:
    codec = Codec(signing_key=b"k")
    h = {"tasuki-job": job}
    codec.sign(queue, h, body)
    codec.verify(queue, h, body)  # the untouched message passes
    if body:
        i = flip % len(body)
        tampered = body[:i] + bytes([body[i] ^ 0x01]) + body[i + 1 :]
        with pytest.raises(SignatureError):
            codec.verify(queue, h, tampered)
    with pytest.raises(SignatureError):
        codec.verify(queue + "x", h, body)


# -- tasuki-* headers --------------------------------------------------------------------
@FUZZ
@given(headers=headers)
def test_header_checks_answer_a_sentence_or_nothing_and_enqueue_agrees(
    headers: dict[str, str],
) -> None:
    why = tasuki_headers.problem(headers)
    assert why is None or why.startswith("header tasuki-")
    try:
        check_headers(headers)
    except InvalidArgument:
        return
    assert why is None
    for key, value in headers.items():  # what passed is believable
        if key == "tasuki-not-before":
            assert 0.0 <= float(value) <= tasuki_headers.MAX_TIME


def _hostile_messages(seed: int) -> list[dict[str, str]]:
    """Every `tasuki-*` header with every hostile value, on a message of a real job."""
    rng = random.Random(seed)
    out = []
    for name in TASUKI_HEADERS:
        for value in HOSTILE_VALUES:
            headers = {"tasuki-job": "work", name: value}
            if rng.random() < 0.3:  # and some with a second hostile header
                headers[rng.choice(TASUKI_HEADERS)] = rng.choice(HOSTILE_VALUES)
            out.append(headers)
    return out


def _future(headers: dict[str, str]) -> bool:
    """A believable not-before still to come: a delay, not hostile (it would wait)."""
    value = headers.get("tasuki-not-before")
    return value is not None and tasuki_headers.problem(headers) is None and float(value) > 1e9


def test_a_worker_fed_every_hostile_header_dead_letters_them_and_runs_the_rest(
    any_url: str,
) -> None:
    """Nothing a header carries stops the worker: each message runs or is dead-lettered
    with a reason, the good ones run once, and the worker's loops all go on."""
    app = tasuki.App(any_url)
    ran: list[object] = []

    @app.job
    def work(n: object) -> None:
        ran.append(n)

    try:
        body = b'{"args": [1], "kwargs": {}}'
        stored = bad = 0
        for headers in _hostile_messages(seed=32):
            if _future(headers):
                continue
            try:  # straight to the backend: what a writer to the queue can do
                app.backend.enqueue([Envelope("default", new_id(), body, headers)])
            except Exception:  # the engine refuses it (NUL, surrogates, sizes on SQS); the
                continue  # producer refuses it before (`check_headers`)
            stored += 1
            bad += tasuki_headers.problem(headers) is not None
        work.enqueue_many([(["good", n],) for n in range(20)])
        worker = app.worker(concurrency=4)
        worker.run(until_idle=True, timeout=90)
        assert worker.fatal.reason is None
        goods = sorted(r[1] for r in ran if isinstance(r, list) and r[:1] == ["good"])
        assert goods == list(range(20)), "a good message was lost or ran twice"
        dead = app.dead_letters("default", limit=10_000)
        refused = [d for d in dead if d.reason.startswith("refused: bad header tasuki-")]
        assert len(refused) == bad
        assert all(d.reason for d in dead)
        assert len(dead) + len(ran) - 20 == stored
        s = app.stats("default")
        assert (s["ready"], s["in_flight"], s["delayed"]) == (0, 0, 0)
    finally:
        app.close()


# -- URLs --------------------------------------------------------------------------------
SCHEMES = ["redis", "rediss", "unix", "memory", "postgresql", "sqs", "ftp", "", "REDIS"]
url_rest = st.text(alphabet=string.printable + "\x00é[]%@:/?&=", max_size=40)


@pytest.mark.parametrize("url", corpus.BAD_URLS)
def test_corpus_urls_raise_only_tasuki_errors(url: str, tmp_path: Path) -> None:
    _open_url(url.replace("sqlite:///x.db", f"sqlite:///{tmp_path}/x.db"))


@FUZZ
@given(scheme=st.sampled_from(SCHEMES), rest=url_rest)
def test_backend_urls_raise_only_tasuki_errors(scheme: str, rest: str) -> None:
    _open_url(f"{scheme}://{rest}")


@FUZZ
@given(query=url_rest)
def test_sqlite_url_options_raise_only_tasuki_errors(
    query: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _open_url(f"sqlite:///{tmp_path_factory.getbasetemp()}/fuzz.db?{query}")


def _open_url(url: str) -> None:
    try:
        backend = backend_from_url(url)
    except TasukiError:
        return
    backend.close()


# -- cron --------------------------------------------------------------------------------
@pytest.mark.parametrize("cron", corpus.BAD_CRONS)
def test_corpus_crons_are_accepted_or_refused_cleanly(cron: str) -> None:
    _check_cron(cron)


@FUZZ
@given(
    cron=st.lists(
        st.sampled_from(["*", "*/5", "0", "59", "60", "1-5", "MON", "L", "#", ",", "?", "-1", "W"])
        | st.text(max_size=6),
        max_size=7,
    ).map(" ".join)
)
def test_cron_expressions_are_accepted_or_refused_cleanly(cron: str) -> None:
    _check_cron(cron)


def _check_cron(cron: str) -> None:
    app = tasuki.App("memory://")

    @app.job
    def tick() -> None: ...

    try:
        Periodic.check_schedule(cron, None)
    except InvalidArgument:
        return
    p = Periodic.create(tick, cron=cron, every=None)
    ticks = p.ticks(1_800_000_000.0, 1_800_000_000.0 + 7 * 86400)
    assert ticks == sorted(ticks)


# -- the CLI -----------------------------------------------------------------------------
COMMANDS = [
    ["stats"],
    ["purge"],
    ["dead", "list"],
    ["dead", "show"],
    ["dead", "redrive"],
    ["dead", "purge"],
    ["enqueue"],
    ["cancel"],
]
cli_args = st.lists(
    st.sampled_from(["--url", "-q", "--json", "--id", "--delay", "--kwargs", "--all", "-h"])
    | st.text(alphabet=string.printable + "é\x00", max_size=12),
    max_size=5,
)


@pytest.mark.parametrize("args", corpus.BAD_CLI_ARGS, ids=lambda a: " ".join(a)[:40])
def test_corpus_cli_arguments_end_cleanly(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _run_cli(args, f"sqlite:///{tmp_path / 'cli.db'}")


@FUZZ
@given(command=st.sampled_from(COMMANDS), args=cli_args)
def test_cli_arguments_end_cleanly(
    command: list[str], args: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    where = tmp_path_factory.getbasetemp()
    if "--watch" in args:  # refreshes until interrupted
        return
    _run_cli([*command, *args], f"sqlite:///{where / 'cli.db'}", cwd=where)


def _run_cli(args: list[str], url: str, cwd: Path | None = None) -> None:
    import os

    runner = CliRunner()
    before = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = runner.invoke(cli, args, env={"TASUKI_URL": url}, input="n\n")
    finally:
        os.chdir(before)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"tasuki {args!r} crashed") from result.exception
    assert result.exit_code in (0, 1, 2), (args, result.exit_code, result.output)
    assert "Traceback" not in result.output, result.output
