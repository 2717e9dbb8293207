"""Log records keep their facts under any logging setup, not only under tasuki's format."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import orjson
import pytest

import tasuki
from tasuki import logs


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """A handler on the tasuki logger with a user's format, as `basicConfig` would give."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        logging.Formatter("%(name)s %(levelname)s %(message)s | %(queue)s %(job)s %(id)s")
    )
    handler.addFilter(lambda r: logs.event_name(r) is not None)
    logs.logger.addHandler(handler)
    level = logs.logger.level
    logs.logger.setLevel(logging.INFO)
    try:
        yield out
    finally:
        logs.logger.removeHandler(handler)
        logs.logger.setLevel(level)


def test_a_dead_letter_reads_whole_under_a_plain_format(stream: io.StringIO) -> None:
    app = tasuki.App("memory://")

    @app.job(queue="mail", retry=tasuki.Retry(max_attempts=1))
    def send(to: str) -> None:
        raise ValueError("no such mailbox")

    msg_id = send.enqueue("a@example.com")
    app.worker(concurrency=1).run(until_idle=True, timeout=30)
    [line] = [x for x in stream.getvalue().splitlines() if "dead-lettered" in x]
    head, attrs = line.split(" | ")
    assert head.startswith(f"tasuki ERROR dead-lettered queue=mail job=send id={msg_id} ")
    assert "reason=" in head and 'error="ValueError: no such mailbox"' in head
    assert attrs == f"mail send {msg_id}"


def test_the_formats_keep_the_bare_event_name() -> None:
    captured: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, r: logging.LogRecord) -> None:
            captured.append(r)

    handler = Keep()
    logs.logger.addHandler(handler)
    try:
        logs.event("dead-lettered", queue="q", job="j", id="abc", attempt=1, reason="a b")
    finally:
        logs.logger.removeHandler(handler)
    [record] = captured
    assert logs.event_name(record) == "dead-lettered" and record.queue == "q"  # type: ignore[attr-defined]
    plain = logs.PlainFormatter(worker=2).format(record)
    assert plain.endswith('dead-lettered queue=q job=j id=abc attempt=1 reason="a b" worker=2')
    doc = orjson.loads(logs.JSONFormatter().format(record))
    assert doc["event"] == "dead-lettered" and doc["id"] == "abc" and doc["reason"] == "a b"


def test_a_field_named_like_a_record_attribute_stays_in_the_dict() -> None:
    captured: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, r: logging.LogRecord) -> None:
            captured.append(r)

    handler = Keep()
    logs.logger.addHandler(handler)
    try:
        logs.event("dead-lettered", queue="q", process="mine", name="x")
    finally:
        logs.logger.removeHandler(handler)
    [record] = captured
    assert record.name == "tasuki" and record.process != "mine"
    assert record.tasuki == {"queue": "q", "process": "mine", "name": "x"}  # type: ignore[attr-defined]
    assert record.getMessage() == "dead-lettered queue=q process=mine name=x"


def test_a_record_any_handler_gets_can_be_encoded() -> None:
    """A job's text with a lone surrogate reaches the message and the traceback escaped:
    a user's file handler, or a test runner shipping captured logs to another process
    (pytest-xdist: it crashed the worker), cannot encode a lone surrogate."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    logs.logger.addHandler(handler)
    try:
        try:
            raise ValueError("bad \ud800 text")
        except ValueError as exc:
            logs.event("dead-lettered", exc=exc, queue="q", id="m", reason="bad \udfff")
    finally:
        logs.logger.removeHandler(handler)
    [record] = records
    record.getMessage().encode("utf-8")
    assert record.exc_text is not None
    record.exc_text.encode("utf-8")
    assert "\\udfff" in record.getMessage() and "\\ud800" in record.exc_text
