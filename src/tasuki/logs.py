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
import os
import sys
import time
import traceback
from types import TracebackType
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


# What a field may not be called as a record attribute: LogRecord's own (`%(name)s`, ...).
_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "event"}


class Facts:
    """An event's fields as `key=value` text, rendered only when a handler formats it."""

    __slots__ = ("fields",)

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields

    def __str__(self) -> str:
        # Encodable by any handler (a file's, a test runner's that ships it to another
        # process): a lone surrogate from a job's text is escaped here, not only by
        # tasuki's own formats.
        return _utf8(" ".join(f"{k}={_value(v)}" for k, v in self.fields.items()))  # type: ignore[no-any-return]


def event(name: str, /, exc: BaseException | None = None, **fields: Any) -> None:
    """Log one event; callers on the hot path check `enabled(name)` first.

    The message reads `dead-lettered queue=q job=j id=... reason=...` under any format,
    `record.event` is the bare name, and each field is a record attribute too
    (`%(queue)s`), besides the dict `record.tasuki` (a field named like one of
    LogRecord's own attributes lives only there). `exc`: the job's exception, whose
    traceback tasuki's formats print from the job's own frames (`job_traceback`).
    """
    level = EVENT_LEVELS.get(name, logging.INFO)
    if logger.isEnabledFor(level):
        extra = {k: v for k, v in fields.items() if k not in _RESERVED}
        extra["tasuki"] = fields
        extra["event"] = name
        msg, args = (f"{name} %s", (Facts(fields),)) if fields else (name, ())
        if exc is None:
            logger.log(level, msg, *args, extra=extra)
            return
        # The traceback as text (`exc_text`, which every logging.Formatter appends), not
        # as `exc_info`: tools that capture a logged exception (Sentry's logging
        # integration) would report the job's exception a second time.
        fn, lno, func, _ = logger.findCaller(stacklevel=2)
        record = logger.makeRecord(logger.name, level, fn, lno, msg, args, None, func, extra)
        record.exc_text = _utf8(job_traceback(exc).rstrip("\n"))
        logger.handle(record)


def event_name(record: logging.LogRecord) -> str | None:
    """The bare name of a tasuki event record (`dead-lettered`), None for other records."""
    name = record.__dict__.get("event")
    return name if isinstance(name, str) and "tasuki" in record.__dict__ else None


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


# tasuki's own directory, where the frames a job's traceback starts with come from.
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
# What a process job's error carries: the child's traceback, as a note (errors.py).
CHILD_NOTE = "--- raised in the job process ---"


def _ours(tb: TracebackType) -> bool:
    return tb.tb_frame.f_code.co_filename.startswith(_PACKAGE)


def job_traceback(error: BaseException) -> str:
    """A job's traceback as its author reads it, from the job's own first frame.

    A job's exception unwinds through tasuki's frames first (the worker thread calling
    the job, the event loop awaiting it, the child process of a process job): they say
    nothing about what went wrong and push the frame that does off a dashboard's first
    screen, so they are collapsed into one line, `[N frames of tasuki]`. A frame of
    tasuki's below the job's (a call the job made into tasuki) stays, and an error of
    tasuki's own, with no frame of the job's, keeps its whole traceback.
    """
    first = error.__traceback__
    tb, hidden = first, 0
    while tb is not None and _ours(tb):
        tb, hidden = tb.tb_next, hidden + 1
    from_child = any(CHILD_NOTE in note for note in getattr(error, "__notes__", ()))
    if tb is None and not from_child:
        tb, hidden = first, 0  # tasuki's own error: all of it matters
    lines = traceback.format_exception(type(error), error, tb)
    if hidden and tb is not None:
        lines.insert(1, f"  [{hidden} frame{'s' if hidden > 1 else ''} of tasuki]\n")
    return "".join(lines)


class _JobTracebacks(logging.Formatter):
    """A traceback from the job's own frames, tasuki's above them collapsed."""

    def formatException(self, ei: Any) -> str:
        error = ei[1] if isinstance(ei, tuple) else None
        if isinstance(error, BaseException):
            return job_traceback(error).rstrip("\n")
        return super().formatException(ei)


class PlainFormatter(_JobTracebacks):
    def __init__(self, worker: int | None = None) -> None:
        super().__init__()
        self.worker = worker

    def format(self, record: logging.LogRecord) -> str:
        parts = [_iso(record.created), f"{record.levelname:<7}", printable(record.getMessage())]
        if event_name(record) is None:  # an event's message carries its fields already
            fields: dict[str, Any] = getattr(record, "tasuki", {})
            parts += [f"{k}={_value(v)}" for k, v in fields.items()]
        if self.worker is not None:
            parts.append(f"worker={self.worker}")
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + _lines(self.formatException(record.exc_info))
        elif record.exc_text:
            line += "\n" + _lines(record.exc_text)
        return line


class JSONFormatter(_JobTracebacks):
    def __init__(self, worker: int | None = None) -> None:
        super().__init__()
        self.worker = worker

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": _iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": _utf8(event_name(record) or record.getMessage()),
        }
        doc.update({k: _utf8(v) for k, v in getattr(record, "tasuki", {}).items()})
        if self.worker is not None:
            doc["worker"] = self.worker
        if record.exc_info:
            doc["exception"] = _utf8(self.formatException(record.exc_info))
        elif record.exc_text:
            doc["exception"] = _utf8(record.exc_text)
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


def configured_elsewhere() -> bool:
    """Whether the app configured logging at import (`logging.basicConfig(...)`, a
    handler on the root logger): the worker then leaves logging as it is. A handler added
    to the `tasuki` logger alone (an error reporter, a test's probe) is an addition, not
    a configuration: tasuki's own output still goes to stderr beside it."""
    return bool(logging.getLogger().handlers)


def configure_from_file(path: str) -> None:
    """Apply a logging configuration file: a `dictConfig` in JSON (`.json`) or YAML
    (`.yaml`, `.yml`: needs PyYAML), else a `fileConfig` ini file.

    Loggers that exist already (tasuki's) stay enabled unless the file says
    `disable_existing_loggers: true`: the standard library's default would silence them.
    Raises ValueError with what is wrong in the file.
    """
    import logging.config

    lower = path.lower()
    try:
        if lower.endswith((".json", ".yaml", ".yml")):
            with open(path, "rb") as f:
                raw = f.read()
            if lower.endswith(".json"):
                config = orjson.loads(raw)
            else:
                try:
                    import yaml  # type: ignore[import-untyped]
                except ImportError:
                    raise ImportError("a YAML logging configuration needs PyYAML") from None
                config = yaml.safe_load(raw)
            if not isinstance(config, dict):
                raise ValueError("expected a dictConfig mapping at the top")
            config.setdefault("version", 1)
            config.setdefault("disable_existing_loggers", False)
            logging.config.dictConfig(config)
        else:
            logging.config.fileConfig(path, disable_existing_loggers=False)
    except Exception as exc:  # orjson, yaml, configparser and logging each raise their own
        # dictConfig says which handler failed, and its cause says why: both.
        causes = [exc]
        while causes[-1].__cause__ is not None and len(causes) < 4:
            causes.append(causes[-1].__cause__)  # type: ignore[arg-type]
        raise ValueError(": ".join(str(c) or type(c).__name__ for c in causes)) from exc
