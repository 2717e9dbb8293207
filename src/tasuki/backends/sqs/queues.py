"""Queue `q` is SQS queue `PREFIX + q`, with its dead-letter queue `PREFIX + q + "-dead"`
beside it (`.fifo` names keep their suffix last). Both are created on first use with
the attributes tasuki needs; existing ones are read and checked.

Priority level p > 0 of `q` is one more SQS queue, `PREFIX + q + "-p" + p` (created on
its first message, sharing `q`'s dead-letter queue): level 0 is `q` itself, so a queue
without priorities is what it always was. A receipt handle from a level queue travels
as the token `p<level>|<handle>` (`level_token`), so settling finds its queue.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, replace
from typing import Any

import orjson

from tasuki.backends.sqs.options import SQS_MAX_RETENTION, SqsOptions
from tasuki.errors import BackendError, BackendUnavailable, ConfigurationError

log = logging.getLogger("tasuki.sqs")

FIFO = ".fifo"
DEAD_SUFFIX = "-dead"
LEVEL_SUFFIX = re.compile(r"-p([1-9])$")
DEFAULT_VISIBILITY = 30
# The message size SQS has allowed by default on every queue for years (256 KiB); a
# queue created with more (AWS allows up to 1 MiB since 2025) is read back and used.
DEFAULT_MAX_SIZE = 262_144


@dataclass(frozen=True, slots=True)
class QueueInfo:
    name: str
    url: str
    dead_url: str
    fifo: bool
    max_message_size: int
    max_receive_count: int
    # The priority level this SQS queue holds (0: the queue itself).
    level: int = 0


def level_token(level: int, handle: str) -> str:
    """The lease token of a receipt handle from level `level` (the handle itself at 0)."""
    return handle if level == 0 else f"p{level}|{handle}"


def split_token(token: str) -> tuple[int, str]:
    """(level, receipt handle) of a lease token (`level_token`'s inverse). A receipt
    handle is base64 text, so it never holds '|'."""
    if token[:1] == "p" and token[2:3] == "|" and token[1:2].isdigit():
        return int(token[1]), token[3:]
    return 0, token


def _split_fifo(queue: str) -> tuple[str, str]:
    return (queue[: -len(FIFO)], FIFO) if queue.endswith(FIFO) else (queue, "")


def sqs_names(options: SqsOptions, queue: str, level: int = 0) -> tuple[str, str]:
    """(main queue name, dead-letter queue name) on SQS for tasuki queue `queue`; with
    `level`, the name of that priority level's queue (the dead-letter queue is shared)."""
    stem, fifo = _split_fifo(queue)
    stem = options.prefix + stem
    main = stem + (f"-p{level}" if level else "") + fifo
    return main, stem + DEAD_SUFFIX + fifo


def tasuki_name(options: SqsOptions, sqs_name: str) -> str | None:
    """The tasuki queue of an SQS main queue name, None for other queues, DLQs and
    priority levels."""
    if not sqs_name.startswith(options.prefix):
        return None
    name = sqs_name[len(options.prefix) :]
    stem, _ = _split_fifo(name)
    if stem.endswith(DEAD_SUFFIX) or not stem or LEVEL_SUFFIX.search(stem):
        return None
    return name


def level_of(options: SqsOptions, queue: str, sqs_name: str) -> int | None:
    """The priority level `sqs_name` holds for tasuki queue `queue`, None if none."""
    for level in range(10):
        if sqs_names(options, queue, level)[0] == sqs_name:
            return level
    return None


def check_name(queue: str) -> None:
    """A tasuki queue named like a priority level of another would share its SQS queue."""
    if LEVEL_SUFFIX.search(_split_fifo(queue)[0]):
        raise ConfigurationError(
            f"queue name {queue!r} on sqs://: names ending in -p1 .. -p9 are the SQS queues"
            " of another queue's priority levels; choose another name"
        )


def _is_missing(error: Exception) -> bool:
    code = getattr(error, "response", {}).get("Error", {}).get("Code", "")
    return "NonExistentQueue" in code or "QueueDoesNotExist" in code


class Queues:
    """Queue URLs by tasuki queue name, created or checked once per process."""

    def __init__(self, client: Any, options: SqsOptions) -> None:
        self._client = client
        self._options = options
        self._known: dict[tuple[str, int], QueueInfo] = {}
        self._mutex = threading.Lock()

    def forget(self, queue: str) -> None:
        with self._mutex:
            for key in [k for k in self._known if k[0] == queue]:
                del self._known[key]

    def get(self, queue: str, create: bool = True, level: int = 0) -> QueueInfo | None:
        """The SQS queue of `queue`'s priority `level` (0: the queue itself), created
        when `create` (a level's queue with the queue's dead-letter queue)."""
        info = self._known.get((queue, level))
        if info is not None:
            return info
        base = None
        if level:
            base = self.get(queue, create)
            if base is None:
                return None
        with self._mutex:
            info = self._known.get((queue, level))
            if info is None:
                try:
                    if base is None:
                        info = self._open(queue, create)
                    else:
                        info = self._level(base, level, create)
                except Exception as exc:
                    # A queue first used while the server is down: the same
                    # BackendUnavailable as every other call, or the caller (a worker's
                    # fetch loop) takes it for a bug and stops.
                    down = unreachable(exc, self._options.url)
                    if down is not None:
                        raise down from exc
                    raise
                if info is not None:
                    self._known[(queue, level)] = info
            return info

    def levels(self, queue: str) -> list[int]:
        """The priority levels above 0 whose SQS queues exist (one ListQueues call)."""
        stem, _ = _split_fifo(queue)
        found: set[int] = set()
        for url in self.urls(self._options.prefix + stem + "-p"):
            level = level_of(self._options, queue, url.rsplit("/", 1)[-1])
            if level:
                found.add(level)
        return sorted(found)

    def urls(self, prefix: str) -> list[str]:
        """The URLs of the SQS queues whose names start with `prefix` (ListQueues, every
        page)."""
        paginator = self._client.get_paginator("list_queues")
        try:
            return [
                url
                for page in paginator.paginate(QueueNamePrefix=prefix)
                for url in page.get("QueueUrls", [])
            ]
        except Exception as exc:
            # Listed by a lease every minute (`levels`): the server down then is an outage
            # like any other (a worker's fetch loop backs off), not a bug.
            down = unreachable(exc, self._options.url)
            if down is not None:
                raise down from exc
            raise

    def _url(self, name: str) -> str | None:
        try:
            return str(self._client.get_queue_url(QueueName=name)["QueueUrl"])
        except Exception as exc:
            if _is_missing(exc):
                return None
            raise

    def _level(self, base: QueueInfo, level: int, create: bool) -> QueueInfo | None:
        name, _ = sqs_names(self._options, base.name, level)
        url = self._url(name)
        if url is None:
            if not create:
                return None
            url = self._create(name, base.fifo, base.dead_url)
        info = self._check(base.name, name, url, base.dead_url, base.fifo)
        return replace(info, level=level)

    def _open(self, queue: str, create: bool) -> QueueInfo | None:
        check_name(queue)
        name, dead_name = sqs_names(self._options, queue)
        fifo = name.endswith(FIFO)
        url = self._url(name)
        dead_url = self._url(dead_name)
        if url is None and not create:
            return None
        if dead_url is None:
            dead_url = self._create(dead_name, fifo, None)
        if url is None:
            url = self._create(name, fifo, dead_url)
        return self._check(queue, name, url, dead_url, fifo)

    def _create(self, name: str, fifo: bool, dead_url: str | None) -> str:
        attrs = {
            "VisibilityTimeout": str(DEFAULT_VISIBILITY),
            "MessageRetentionPeriod": str(SQS_MAX_RETENTION),
            "MaximumMessageSize": str(DEFAULT_MAX_SIZE),
            "ReceiveMessageWaitTimeSeconds": "0",
            "DelaySeconds": "0",
        }
        if fifo:
            attrs["FifoQueue"] = "true"
        if dead_url is not None:
            dead_arn = self._client.get_queue_attributes(
                QueueUrl=dead_url, AttributeNames=["QueueArn"]
            )["Attributes"]["QueueArn"]
            attrs["RedrivePolicy"] = orjson.dumps(
                {
                    "deadLetterTargetArn": dead_arn,
                    "maxReceiveCount": self._options.max_receive_count,
                }
            ).decode()
        log.info("sqs: creating queue %s", name)
        return str(self._client.create_queue(QueueName=name, Attributes=attrs)["QueueUrl"])

    def _check(self, queue: str, name: str, url: str, dead_url: str, fifo: bool) -> QueueInfo:
        attrs = self._client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])[
            "Attributes"
        ]
        if (attrs.get("FifoQueue") == "true") != fifo:
            raise ConfigurationError(f"SQS queue {name}: FifoQueue does not match its name")
        retention = int(attrs.get("MessageRetentionPeriod", SQS_MAX_RETENTION))
        if retention < SQS_MAX_RETENTION:
            log.warning(
                "sqs: queue %s has MessageRetentionPeriod=%s (tasuki creates queues with %s):"
                " SQS deletes messages older than that, whatever their state",
                name,
                retention,
                SQS_MAX_RETENTION,
            )
        if int(attrs.get("DelaySeconds", 0)) != 0:
            log.warning(
                "sqs: queue %s has DelaySeconds=%s: every message, and every re-send of a"
                " released one, waits that long at least",
                name,
                attrs["DelaySeconds"],
            )
        receives = self._options.max_receive_count
        policy = attrs.get("RedrivePolicy")
        if policy:
            receives = int(orjson.loads(policy).get("maxReceiveCount", receives))
            if receives < self._options.max_receive_count:
                log.warning(
                    "sqs: queue %s has RedrivePolicy maxReceiveCount=%s: SQS moves a message"
                    " to the dead-letter queue after that many receives, so max_attempts"
                    " above %s is refused at enqueue",
                    name,
                    receives,
                    receives - 1,
                )
        else:
            log.warning(
                "sqs: queue %s has no RedrivePolicy: tasuki still dead-letters exhausted"
                " messages itself, but a message no tasuki worker can decode is never"
                " moved aside",
                name,
            )
        size = int(attrs.get("MaximumMessageSize", DEFAULT_MAX_SIZE))
        if not url or not dead_url:
            raise BackendError(f"SQS queue {name} has no URL")
        return QueueInfo(queue, url, dead_url, fifo, size, receives)


CONNECTION_ERRORS = frozenset({"EndpointConnectionError", "ConnectionClosedError"})


def unreachable(exc: BaseException, url: str) -> BackendUnavailable | None:
    """The `BackendUnavailable` a botocore connection error stands for (None: another
    error)."""
    if type(exc).__name__ in CONNECTION_ERRORS:
        return BackendUnavailable(f"SQS at {url} is unreachable: {exc}")
    return None
