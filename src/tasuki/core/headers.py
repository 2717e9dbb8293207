"""The one place where the `tasuki-*` headers of a message are judged.

A header is written by whoever could write to the queue, and only the job name, the
content type and the workflow plan are covered by a signature. So a worker believes no
`tasuki-*` value before it passed `problem`: finite numbers in range, known values,
bounded sizes, text every engine can store. A message that fails is a poison message: the
receiver dead-letters it with the sentence `problem` returns, instead of letting a `nan`
reach a settle. The producer refuses the same values at enqueue with `check`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping

from tasuki.core.message import (
    CONTENT_TYPE_HEADER,
    FLOW_HEADER,
    GROUP_HEADER,
    JOB_HEADER,
    NOT_BEFORE_HEADER,
    SIGNATURE_HEADER,
)
from tasuki.core.text import unstorable
from tasuki.errors import InvalidArgument

PREFIX = "tasuki-"
UNIQUE_HEADER = "tasuki-unique"
UNIQUE_PENDING_HEADER = "tasuki-unique-pending"
# The number of the durable wait a re-sent copy sleeps for (SQS: `sqs/durable.py`).
WAIT_HEADER = "tasuki-wait"
MAX_NAME = 1000  # a job name
MAX_VALUE = 1024  # a unique key, and any other short header
MAX_GROUP = 128  # an SQS FIFO message group id
MAX_FLOW = 1 << 20  # a workflow plan
MAX_OTHER = 1 << 16  # a `tasuki-*` header this release does not know (a newer producer's)
# Epoch seconds: a not-before past the year 5000 is no time anyone meant.
MAX_TIME = 1e11

_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+/-]{0,63}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _name(value: str) -> str | None:
    if not value:
        return "is empty"
    if len(value) > MAX_NAME:
        return f"is longer than {MAX_NAME} characters"
    return None


def _content_type(value: str) -> str | None:
    return None if _TOKEN.fullmatch(value) else "is not a content type name"


def _signature(value: str) -> str | None:
    return None if _HEX64.fullmatch(value) else "is not 64 lowercase hex digits"


def _not_before(value: str) -> str | None:
    if len(value) > 64 or not value.isascii():  # float() takes any script's digits
        return "is not a number of epoch seconds"
    try:
        at = float(value)
    except ValueError:
        return "is not a number of epoch seconds"
    if not math.isfinite(at) or not 0.0 <= at <= MAX_TIME:
        return f"is not a time from 0 to {MAX_TIME:.0e} epoch seconds"
    return None


def _group(value: str) -> str | None:
    if not value or len(value) > MAX_GROUP:
        return f"is not 1 to {MAX_GROUP} characters"
    return "holds a control character" if _CONTROL.search(value) else None


def _flow(value: str) -> str | None:
    return f"is longer than {MAX_FLOW} characters" if len(value) > MAX_FLOW else None


def _unique(value: str) -> str | None:
    if not value or len(value) > MAX_VALUE:
        return f"is not 1 to {MAX_VALUE} characters"
    return None


def _pending(value: str) -> str | None:
    return None if value == "1" else "is not 1"


def _wait(value: str) -> str | None:
    ok = value.isascii() and value.isdigit() and len(value) <= 20
    return None if ok else "is not a wait's number"


def _other(value: str) -> str | None:
    return f"is longer than {MAX_OTHER} characters" if len(value) > MAX_OTHER else None


RULES: Mapping[str, Callable[[str], str | None]] = {
    JOB_HEADER: _name,
    CONTENT_TYPE_HEADER: _content_type,
    SIGNATURE_HEADER: _signature,
    NOT_BEFORE_HEADER: _not_before,
    GROUP_HEADER: _group,
    FLOW_HEADER: _flow,
    UNIQUE_HEADER: _unique,
    UNIQUE_PENDING_HEADER: _pending,
    WAIT_HEADER: _wait,
}


def problem(headers: Mapping[str, str]) -> str | None:
    """None if every `tasuki-*` header can be believed, else a sentence naming the first
    one that cannot (its value shown shortened, for the dead letter's reason)."""
    for key, value in headers.items():
        if not key.startswith(PREFIX):
            continue
        if not isinstance(value, str):
            return f"header {key} is not text"
        unfit = unstorable(value)
        why = f"contains {unfit}" if unfit is not None else RULES.get(key, _other)(value)
        if why is not None:
            return f"header {key} {why}: {value[:60]!r}"
    return None


def check(headers: Mapping[str, str]) -> None:
    """`problem` at enqueue: a value no worker would believe is refused before it is sent."""
    why = problem(headers)
    if why is not None:
        raise InvalidArgument(f"bad {why}")
