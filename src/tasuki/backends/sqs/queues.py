"""Queue `q` is SQS queue `PREFIX + q`, with its dead-letter queue `PREFIX + q + "-dead"`
beside it (`.fifo` names keep their suffix last). Both are created on first use with
the attributes tasuki needs; existing ones are read and checked.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

import orjson

from tasuki.backends.sqs.options import SQS_MAX_RETENTION, SqsOptions
from tasuki.errors import BackendError, BackendUnavailable, ConfigurationError

log = logging.getLogger("tasuki.sqs")

FIFO = ".fifo"
DEAD_SUFFIX = "-dead"
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


def sqs_names(options: SqsOptions, queue: str) -> tuple[str, str]:
    """(main queue name, dead-letter queue name) on SQS for tasuki queue `queue`."""
    if queue.endswith(FIFO):
        stem = options.prefix + queue[: -len(FIFO)]
        return stem + FIFO, stem + DEAD_SUFFIX + FIFO
    return options.prefix + queue, options.prefix + queue + DEAD_SUFFIX


def tasuki_name(options: SqsOptions, sqs_name: str) -> str | None:
    """The tasuki queue of an SQS main queue name, None for other queues and DLQs."""
    if not sqs_name.startswith(options.prefix):
        return None
    name = sqs_name[len(options.prefix) :]
    stem = name[: -len(FIFO)] if name.endswith(FIFO) else name
    if stem.endswith(DEAD_SUFFIX) or not stem:
        return None
    return name


def _is_missing(error: Exception) -> bool:
    code = getattr(error, "response", {}).get("Error", {}).get("Code", "")
    return "NonExistentQueue" in code or "QueueDoesNotExist" in code


class Queues:
    """Queue URLs by tasuki queue name, created or checked once per process."""

    def __init__(self, client: Any, options: SqsOptions) -> None:
        self._client = client
        self._options = options
        self._known: dict[str, QueueInfo] = {}
        self._mutex = threading.Lock()

    def forget(self, queue: str) -> None:
        with self._mutex:
            self._known.pop(queue, None)

    def get(self, queue: str, create: bool = True) -> QueueInfo | None:
        info = self._known.get(queue)
        if info is not None:
            return info
        with self._mutex:
            info = self._known.get(queue)
            if info is None:
                try:
                    info = self._open(queue, create)
                except Exception as exc:
                    # A queue first used while the server is down: the same
                    # BackendUnavailable as every other call, or the caller (a worker's
                    # fetch loop) takes it for a bug and stops.
                    down = unreachable(exc, self._options.url)
                    if down is not None:
                        raise down from exc
                    raise
                if info is not None:
                    self._known[queue] = info
            return info

    def _url(self, name: str) -> str | None:
        try:
            return str(self._client.get_queue_url(QueueName=name)["QueueUrl"])
        except Exception as exc:
            if _is_missing(exc):
                return None
            raise

    def _open(self, queue: str, create: bool) -> QueueInfo | None:
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
