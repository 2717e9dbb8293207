"""Fuzzed inputs: only clean `TasukiError`s (or click usage errors), or dead letters with
a reason. Never a crash, never a dead worker loop, never a lost message.

Hypothesis draws the inputs; `corpus.py` keeps the nastiest ones found as fixed cases.
"""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tasuki
from tasuki.backends.urls import backend_from_url
from tasuki.cli.main import cli
from tasuki.core.codec import Codec
from tasuki.core.periodic import Periodic
from tasuki.errors import InvalidArgument, SerializationError, SignatureError, TasukiError
from tests.chaos import corpus

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

header_text = st.text(max_size=30)
headers = st.dictionaries(
    st.sampled_from(["tasuki-job", "tasuki-content-type", "tasuki-signature", "x"]) | header_text,
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
