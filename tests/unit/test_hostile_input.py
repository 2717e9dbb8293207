"""The pieces that keep hostile input out: text made storable, names refused, headers
judged in one place, log lines that no text can break, and the search for a bad item."""

from __future__ import annotations

import importlib
import logging
import pkgutil

import orjson
import pytest

import tasuki
from tasuki import logs
from tasuki.core import headers
from tasuki.core.message import ErrorInfo
from tasuki.core.text import check_name, storable, unstorable
from tasuki.errors import BackendError, BackendUnavailable, InvalidArgument
from tasuki.runtime.blame import split_until_found


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("plain", "plain"),
        ("café 日本", "café 日本"),
        ("a\x00b", "a\\x00b"),
        ("lone \ud800 and \udfff", "lone \\ud800 and \\udfff"),
        ("\x00\ud83d", "\\x00\\ud83d"),
    ],
)
def test_storable_escapes_only_what_no_engine_takes(text: str, stored: str) -> None:
    assert storable(text) == stored
    stored.encode("utf-8")  # every engine's encoding takes it
    assert "\x00" not in stored


def test_an_error_keeps_its_words_whatever_they_are() -> None:
    info = ErrorInfo("Boom", "bad \x00 \udc80", "Traceback \x00")
    assert (info.message, info.traceback) == ("bad \\x00 \\udc80", "Traceback \\x00")
    orjson.dumps(info.message)  # JSON stores it too


@pytest.mark.parametrize("bad", ["a\x00", "\ud800"])
def test_names_with_what_some_engine_cannot_store_are_refused(bad: str) -> None:
    assert unstorable(bad) is not None
    with pytest.raises(InvalidArgument):
        check_name("queue name", bad)
    app = tasuki.App("memory://")
    with pytest.raises(InvalidArgument):
        app.job(name=bad)(lambda: None)
    app.close()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("tasuki-not-before", "nan"),
        ("tasuki-not-before", "inf"),
        ("tasuki-not-before", "-1"),
        ("tasuki-not-before", "1e400"),
        ("tasuki-not-before", "٣"),
        ("tasuki-job", ""),
        ("tasuki-job", "j" * 1001),
        ("tasuki-content-type", "yaml; rm -rf"),
        ("tasuki-signature", "0" * 63),
        ("tasuki-group", "a\nb"),
        ("tasuki-unique-pending", "yes"),
        ("tasuki-unique", ""),
        ("tasuki-anything", "x\x00"),
        ("tasuki-anything", "x" * 70_000),
    ],
)
def test_a_tasuki_header_no_worker_should_believe_is_named(name: str, value: str) -> None:
    why = headers.problem({name: value, "x-other": "\x00 not ours"})
    assert why is not None and why.startswith(f"header {name} ")
    with pytest.raises(InvalidArgument, match=f"bad header {name}"):
        headers.check({name: value})


def test_well_formed_headers_pass() -> None:
    good = {
        "tasuki-job": "tasks.resize",
        "tasuki-content-type": "json",
        "tasuki-signature": "ab" * 32,
        "tasuki-not-before": repr(1_800_000_000.25),
        "tasuki-group": "tenant-7",
        "tasuki-unique": "{default}unique:job:k",
        "tasuki-unique-pending": "1",
        "traceparent": "00-abc-def-01",
    }
    assert headers.problem(good) is None


def test_every_tasuki_header_the_code_names_has_a_rule() -> None:
    """A `tasuki-*` header added without a rule would be believed unchecked."""
    named = set()
    for info in pkgutil.walk_packages(tasuki.__path__, "tasuki."):
        if any(part in info.name for part in (".web", ".cli", "testing", "__main__")):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:
            continue  # an optional dependency
        for attr, value in vars(module).items():
            if attr.endswith("HEADER") and isinstance(value, str) and value.startswith("tasuki-"):
                named.add(value)
    assert named and named <= set(headers.RULES)


def _record(message: str, *args: object, **fields: object) -> logging.LogRecord:
    record = logging.LogRecord("tasuki", logging.ERROR, __file__, 1, message, args, None)
    record.tasuki = fields
    return record


def test_hostile_text_cannot_break_a_plain_log_line() -> None:
    hostile = "x\n2026-01-01T00:00:00.000Z ERROR forged id=1\r\x1b[31m\u2028\ud800"
    line = logs.PlainFormatter().format(_record("failed: %s", hostile, job=hostile, id="m"))
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    assert "\u2028" not in line
    line.encode("utf-8")
    assert 'job="x\\n2026' in line and "id=m" in line


def test_a_lone_surrogate_does_not_lose_a_json_log_line() -> None:
    line = logs.JSONFormatter().format(_record("failed: %s", "\ud800", job="\udfff"))
    doc = orjson.loads(line)
    assert doc["event"] == "failed: \\ud800" and doc["job"] == "\\udfff"


def test_the_one_bad_item_is_found_and_the_rest_go_through() -> None:
    calls: list[list[int]] = []

    def call(items: list[int]) -> list[str]:
        calls.append(list(items))
        if 13 in items:
            raise ValueError("13 is bad")
        return [f"ok {i}" for i in items]

    got = split_until_found(list(range(20)), call, lambda i, e: f"blamed {i}: {e}")
    assert got == [f"ok {i}" if i != 13 else "blamed 13: 13 is bad" for i in range(20)]
    assert len(calls) <= 2 * 5 + 1 + 2  # a bisection (the bad one tried thrice), not one per item


def test_an_outage_is_no_items_fault() -> None:
    def call(items: list[int]) -> list[int]:
        raise BackendUnavailable("down")

    with pytest.raises(BackendUnavailable):
        split_until_found([1, 2, 3], call, lambda i, e: i)


@pytest.mark.parametrize("error", [BackendError("deadlock"), RuntimeError("a driver's")])
def test_a_passing_failure_is_tried_again_before_blame(error: Exception) -> None:
    failures = iter([True, True, False])

    def call(items: list[int]) -> list[str]:
        if next(failures):
            raise error
        return ["ok"]

    assert split_until_found([1], call, lambda i, e: "blamed") == ["ok"]
