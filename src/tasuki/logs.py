"""One log line per message event, with the fields an operator greps for.

Every event line carries `queue`, `job`, `id` and `attempt`, so the whole story of one
message is one `grep <id>` away. Lines are plain `key=value` or JSON.
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


# What a field may not be called as a record attribute: LogRecord's own (`%(name)s`, ...).
_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "event"}


class Facts:
    """An event's fields as `key=value` text, rendered only when a handler formats it."""

    __slots__ = ("fields",)

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields

    def __str__(self) -> str:
        return " ".join(f"{k}={_value(v)}" for k, v in self.fields.items())


def event(name: str, /, **fields: Any) -> None:
    """Log one event; callers on the hot path check `enabled(name)` first.

    The message reads `dead-lettered queue=q job=j id=... reason=...` under any format,
    `record.event` is the bare name, and each field is a record attribute too
    (`%(queue)s`), besides the dict `record.tasuki` (a field named like one of
    LogRecord's own attributes lives only there).
    """
    level = EVENT_LEVELS.get(name, logging.INFO)
    if logger.isEnabledFor(level):
        extra = {k: v for k, v in fields.items() if k not in _RESERVED}
        extra["tasuki"] = fields
        extra["event"] = name
        if fields:
            logger.log(level, f"{name} %s", Facts(fields), extra=extra)
        else:
            logger.log(level, name, extra=extra)


def event_name(record: logging.LogRecord) -> str | None:
    """The bare name of a tasuki event record (`dead-lettered`), None for other records."""
    name = record.__dict__.get("event")
    return name if isinstance(name, str) and "tasuki" in record.__dict__ else None


def message_fields(queue: str, job: str | None, msg_id: str, attempt: int) -> dict[str, Any]:
    return {"queue": queue, "job": job or "-", "id": msg_id, "attempt": attempt}


def _iso(created: float) -> str:
    ms = int((created - int(created)) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{ms:03d}Z"


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    text = str(v)
    if not text or any(c in text for c in ' "=\n'):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text


class PlainFormatter(logging.Formatter):
    def __init__(self, worker: int | None = None) -> None:
        super().__init__()
        self.worker = worker

    def format(self, record: logging.LogRecord) -> str:
        parts = [_iso(record.created), f"{record.levelname:<7}", record.getMessage()]
        if event_name(record) is None:  # an event's message carries its fields already
            fields: dict[str, Any] = getattr(record, "tasuki", {})
            parts += [f"{k}={_value(v)}" for k, v in fields.items()]
        if self.worker is not None:
            parts.append(f"worker={self.worker}")
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
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
            "event": event_name(record) or record.getMessage(),
        }
        doc.update(getattr(record, "tasuki", {}))
        if self.worker is not None:
            doc["worker"] = self.worker
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
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
    """Whether something besides tasuki gave logging a handler (an app module's
    `logging.basicConfig(...)` at import): the worker then leaves logging as it is."""
    if logging.getLogger().handlers:
        return True
    return any(not isinstance(h, logging.NullHandler) for h in logger.handlers)


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
