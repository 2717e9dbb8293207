"""How job arguments become message bodies, and how a worker knows it may trust a body.

JSON (via orjson) is the default because it is fast, readable in a dashboard and safe to
decode from anyone. Pickle can run code on decode, so it is only ever used when the app
names it, and a worker whose app did not enable it refuses pickled messages.
Signing is optional: with a key, every message carries an HMAC of its queue, job name,
content type, body and workflow plan, and a worker with the same key refuses any message
without a valid one: a tampered body or plan, an unsigned message, or a signed message
replayed onto another queue (where another job of the same name might do something else
with it).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Protocol

import orjson

from tasuki.core.jsontypes import TAG_BYTES, tagged, untagged
from tasuki.core.message import CONTENT_TYPE_HEADER, FLOW_HEADER, JOB_HEADER, SIGNATURE_HEADER
from tasuki.errors import ConfigurationError, SerializationError, SignatureError


class Serializer(Protocol):
    """Encodes the `{"args": [...], "kwargs": {...}}` payload of a job message."""

    content_type: str

    def dumps(self, value: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class JSONSerializer:
    """JSON, with `datetime`, `date`, `time`, `Decimal` and `UUID` carried as themselves
    and enums and dataclasses refused (`jsontypes.py`): never a silent change of type."""

    content_type = "json"

    def dumps(self, value: Any) -> bytes:
        return orjson.dumps(
            tagged(value),
            option=orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS,
        )

    def loads(self, data: bytes) -> Any:
        value = orjson.loads(data)
        return untagged(value) if TAG_BYTES in data else value


class PickleSerializer:
    content_type = "pickle"

    def dumps(self, value: Any) -> bytes:
        import pickle  # only apps that name it pay for loading it

        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)

    def loads(self, data: bytes) -> Any:
        import pickle

        return pickle.loads(data)


SERIALIZERS: dict[str, type[Serializer]] = {"json": JSONSerializer, "pickle": PickleSerializer}


def get_serializer(spec: str | Serializer) -> Serializer:
    if not isinstance(spec, str):
        return spec
    cls = SERIALIZERS.get(spec)
    if cls is None:
        raise ConfigurationError(f"unknown serializer {spec!r}; known: {', '.join(SERIALIZERS)}")
    return cls()


class Codec:
    """Encodes and decodes job payloads with the app's serializer, and signs them."""

    def __init__(self, serializer: str | Serializer = "json", signing_key: bytes | None = None):
        self.serializer = get_serializer(serializer)
        self._accepted = {"json": JSONSerializer(), self.serializer.content_type: self.serializer}
        if isinstance(signing_key, str):
            signing_key = signing_key.encode()
        self._key = signing_key
        ct = self.serializer.content_type
        self._content_headers: Mapping[str, str] = (
            {} if ct == "json" else MappingProxyType({CONTENT_TYPE_HEADER: ct})
        )

    def encode_payload(self, job: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> bytes:
        try:
            return self.serializer.dumps({"args": list(args), "kwargs": dict(kwargs)})
        except Exception as exc:  # TypeError from orjson; PicklingError and more from pickle
            culprit = _first_unserializable(self.serializer, args, kwargs)
            raise SerializationError(
                f"cannot serialize the arguments of job {job!r} as "
                f"{self.serializer.content_type}{culprit}: {exc}"
            ) from exc

    def decode_payload(
        self, headers: Mapping[str, str], body: bytes
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        content_type = headers.get(CONTENT_TYPE_HEADER, "json")
        serializer = self._accepted.get(content_type)
        if serializer is None:
            raise SerializationError(
                f"refusing a {content_type!r} message: this app does not enable that serializer"
            )
        try:
            payload = serializer.loads(body)
        except Exception as exc:
            raise SerializationError(f"cannot decode the {content_type} body: {exc}") from exc
        if not isinstance(payload, dict):
            raise SerializationError("a job body must be an object with 'args' and 'kwargs'")
        args, kwargs = payload.get("args", []), payload.get("kwargs", {})
        if not isinstance(args, list | tuple) or not isinstance(kwargs, dict):
            raise SerializationError("a job body's 'args' must be a list and 'kwargs' an object")
        return tuple(args), kwargs

    @property
    def content_headers(self) -> Mapping[str, str]:
        """What a body's headers must say about its encoding (nothing for JSON)."""
        return self._content_headers

    # -- signing ---------------------------------------------------------------------
    @property
    def signs(self) -> bool:
        return self._key is not None

    def _digest(self, queue: str, headers: Mapping[str, str], body: bytes) -> str:
        import hashlib
        import hmac

        assert self._key is not None
        mac = hmac.new(self._key, digestmod=hashlib.sha256)
        for part in (queue, headers.get(JOB_HEADER, ""), headers.get(CONTENT_TYPE_HEADER, "")):
            # lengths first: no two (queue, job, content type) run together the same way
            data = part.encode("utf-8", "surrogatepass")
            mac.update(b"%d:" % len(data))
            mac.update(data)
        mac.update(body)
        flow = headers.get(FLOW_HEADER)
        if flow is not None:
            # A workflow step's plan says what its settle enqueues: signed with the body.
            # Only when present, so the digest of every other message is unchanged.
            data = flow.encode("utf-8", "surrogatepass")
            mac.update(b"flow:%d:" % len(data))
            mac.update(data)
        return mac.hexdigest()

    def sign(self, queue: str, headers: dict[str, str], body: bytes) -> None:
        if self._key is not None:
            headers[SIGNATURE_HEADER] = self._digest(queue, headers, body)

    def verify(self, queue: str, headers: Mapping[str, str], body: bytes) -> None:
        if self._key is None:
            return
        given = headers.get(SIGNATURE_HEADER)
        if not given:
            raise SignatureError("message is not signed and this app requires signatures")
        if not _same(given, self._digest(queue, headers, body)):
            raise SignatureError(
                "message signature does not match (tampered, or signed for another queue "
                "or with another key): refusing it"
            )


def _same(given: str, expected: str) -> bool:
    """Constant-time comparison; a header may hold any text (compare_digest refuses
    non-ASCII str), so both sides are compared as bytes."""
    import hmac

    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode())


def _first_unserializable(
    serializer: Serializer, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> str:
    """Name the first argument that fails, so the error says which one to fix."""
    for index, value in enumerate(args):
        try:
            serializer.dumps(value)
        except Exception:
            return f" (argument {index}, of type {type(value).__name__})"
    for name, value in kwargs.items():
        try:
            serializer.dumps(value)
        except Exception:
            return f" (argument {name!r}, of type {type(value).__name__})"
    return ""
