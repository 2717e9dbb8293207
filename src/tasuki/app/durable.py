"""Durable steps seen from the App (DESIGN §4c): `app.signal`, and what `app.inspect`
adds of a message's steps and of what it waits for. The steps themselves run in the job
(`ctx.step`, `core/context.py`); the log is `core/steps.py`."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import orjson

from tasuki.backends.base import Backend, SignalStatus
from tasuki.core.job import check_message_id, check_queue
from tasuki.core.records import MessageInfo
from tasuki.core.steps import check_name, describe_wait
from tasuki.errors import SerializationError


def signal(backend: Backend, queue: str, message_id: str, name: str, payload: Any) -> SignalStatus:
    """Store the signal for the message (see `App.signal`)."""
    backend.require("durable_steps", "signal a message")
    check_name(name)
    try:
        data = orjson.dumps(payload)
    except TypeError as exc:
        raise SerializationError(f"signal {name!r}'s payload is not JSON: {exc}") from exc
    if len(data) > backend.capabilities.max_message_size:
        raise SerializationError(
            f"signal {name!r}'s payload is {len(data)} bytes as JSON, over the backend's "
            f"message size limit of {backend.capabilities.max_message_size} bytes"
        )
    return backend.signal(check_queue(queue), check_message_id(message_id), name, data)


def with_steps(backend: Backend, info: MessageInfo) -> MessageInfo:
    """`inspect`'s answer with the message's step records and what it waits for."""
    if not backend.capabilities.durable_steps or info.state in ("unknown", "finished"):
        return info
    steps = tuple(backend.steps(info.queue, info.id))
    waiting = describe_wait(backend.waiting(info.queue, info.id), time.time())
    if not steps and not waiting:
        return info
    return dataclasses.replace(info, steps=steps, waiting=waiting)
