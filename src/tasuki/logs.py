"""One log line per message event, with the fields an operator greps for.

Every event line carries `queue`, `job`, `id` and `attempt`, so the whole story of one
message is one `grep <id>` away. Lines are plain `key=value` or JSON.

A field or message may hold text from a message or a job (a job name, an error): in the
plain format a control character or lone surrogate in it is written as an escape, so no
text can break a line in two or forge another; in JSON a lone surrogate is escaped too,
which would otherwise fail the whole line.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson

logger = logging.getLogger("tasuki")
logger.addHandler(logging.NullHandler())

EVENT_LEVELS: dict[str, int] = {
    "received": logging.INFO,
    "started": logging.INFO,
    "finished": logging.INFO,
    "skipped": logging.INFO,
    "deferred": logging.INFO,
    "retry scheduled": logging.WARNING,
    "dead-lettered": logging.ERROR,
    "exhausted handler ran": logging.WARNING,
    "lease lost": logging.WARNING,
    "cancelled": logging.INFO,
    "released on shutdown": logging.WARNING,
    "ack refused": logging.WARNING,
    "timed out": logging.WARNING,
}


def enabled(event: str, /, _levels: dict[str, int] = EVENT_LEVELS) -> bool:
    return logger.isEnabledFor(_levels.get(event, logging.INFO))


def event(name: str, /, **fields: Any) -> None:
    """Log one event; callers on the hot path check `enabled(name)` first."""
    level = EVENT_LEVELS.get(name, logging.INFO)
    if logger.isEnabledFor(level):
        logger.log(level, name, extra={"tasuki": fields})


def message_fields(queue: str, job: str | None, msg_id: str, attempt: int) -> dict[str, Any]:
    return {"queue": queue, "job": job or "-", "id": msg_id, "attempt": attempt}


def _iso(created: float) -> str:
    ms = int((created - int(created)) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{ms:03d}Z"


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(c: str) -> str:
    code = ord(c)
    if c in _ESCAPES:
        return _ESCAPES[c]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str) -> str:
    """`text` with every character that is not printable (control characters, line
    separators, lone surrogates) written as a backslash escape: one line, always."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _lines(text: str) -> str:
    """A traceback: its own lines kept, anything else in them escaped."""
    return "\n".join(printable(line) for line in text.split("\n"))


def _utf8(value: Any) -> Any:
    """A str JSON can carry: a lone surrogate escaped, anything else as it is."""
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    text = str(v)
    if text and text.isprintable() and not any(c in text for c in ' "='):
        return text
    return '"' + printable(text.replace("\\", "\\\\").replace('"', '\\"')) + '"'


class PlainFormatter(logging.Formatter):
    def __init__(self, worker: int | None = None) -> None:
        super().__init__()
        self.worker = worker

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = getattr(record, "tasuki", {})
        parts = [_iso(record.created), f"{record.levelname:<7}", printable(record.getMessage())]
        parts += [f"{k}={_value(v)}" for k, v in fields.items()]
        if self.worker is not None:
            parts.append(f"worker={self.worker}")
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + _lines(self.formatException(record.exc_info))
        return line


class JSONFormatter(logging.Formatter):
    def __init__(self, worker: int | None = None) -> None:
        super().__init__()
        self.worker = worker

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": _iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": _utf8(record.getMessage()),
        }
        doc.update({k: _utf8(v) for k, v in getattr(record, "tasuki", {}).items()})
        if self.worker is not None:
            doc["worker"] = self.worker
        if record.exc_info:
            doc["exception"] = _utf8(self.formatException(record.exc_info))
        return orjson.dumps(doc, default=str).decode()


def configure(level: str | int = "INFO", fmt: str = "plain", worker: int | None = None) -> None:
    """Send tasuki's logs to stderr in the chosen format (used by the CLI). `worker`: the
    number of this worker in a group (`--workers`), added to every line as `worker`."""
    if fmt not in ("plain", "json"):
        raise ValueError(f"log format must be plain or json, got {fmt!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter(worker) if fmt == "json" else PlainFormatter(worker))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
