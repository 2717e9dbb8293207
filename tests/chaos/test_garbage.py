"""A worker fed garbage keeps running and dead-letters each with a reason; none is lost.

Raw bodies under a `tasuki-job` header (bad JSON, wrong types, wrong arity, huge, an
unknown job, a serializer the app does not enable) and messages with bad or missing
signatures, interleaved with good messages, on every backend.
"""

from __future__ import annotations

import random

import pytest

import tasuki
from tasuki.backends.base import Envelope
from tasuki.core.message import new_id
from tests.chaos import corpus


def _garbage(seed: int, count: int) -> list[tuple[dict[str, str], bytes]]:
    """Random bodies under a real job's name, besides the fixed corpus."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
        if rng.random() < 0.5:
            body = b'{"args": ' + body + b"}"
        out.append(({"tasuki-job": "work"}, body))
    return out


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned-app", "signing-app"])
def test_worker_dead_letters_garbage_and_keeps_running(any_url: str, signed: bool) -> None:
    key = b"the key" if signed else None
    app = tasuki.App(any_url, signing_key=key)
    ran: list[object] = []

    @app.job
    def work(n: object) -> None:  # garbage of the right shape runs: types are the job's affair
        ran.append(n)

    # Straight to the backend, as any writer to the queue can: exactly the bytes and
    # headers given, past the producer's checks (which refuse a bad `tasuki-*` header).
    sender = tasuki.App(any_url)
    # Garbage the backend can carry: a body over its size limit is refused at the send.
    limit = app.backend.capabilities.max_message_size - 4096
    fits = [(h, b) for h, b in corpus.GARBAGE_MESSAGES if limit < 0 or len(b) <= limit]
    garbage = fits + _garbage(seed=7, count=40)
    if signed:
        good_body = b'{"args": [999], "kwargs": {}}'
        garbage += [
            ({"tasuki-job": "work"}, good_body),  # unsigned
            ({"tasuki-job": "work", "tasuki-signature": "0" * 64}, good_body),  # forged
            ({"tasuki-job": "work", "tasuki-signature": "ünïcode"}, good_body),
        ]
    good = 0
    try:
        for i, (headers, body) in enumerate(garbage):
            sender.backend.enqueue([Envelope("default", new_id(), body, headers)])
            if i % 5 == 0:
                work.enqueue(["good", good])  # signed by `app` when it signs
                good += 1
        app.worker(concurrency=4).run(until_idle=True, timeout=60)
        dead = app.dead_letters("default", limit=1000)
        goods = sorted(r[1] for r in ran if isinstance(r, list) and r[:1] == ["good"])
        assert goods == list(range(good)), "a good message was lost among the garbage"
        assert len(ran) == good + _decodable(garbage, signed)
        assert len(dead) == len(garbage) - _decodable(garbage, signed)
        assert all(d.reason for d in dead)
        if signed:
            assert {d.reason for d in dead} == {"refused: bad signature"}
        s = app.stats("default")
        assert (s["ready"], s["in_flight"], s["delayed"]) == (0, 0, 0)
    finally:
        app.close()
        sender.close()


def _decodable(garbage: list[tuple[dict[str, str], bytes]], signed: bool) -> int:
    """Garbage that still forms a call of work(n) runs: it is not dead-lettered."""
    if signed:
        return 0
    codec = tasuki.App("memory://").codec
    count = 0
    for headers, body in garbage:
        if headers.get("tasuki-job") != "work":
            continue
        try:
            args, kwargs = codec.decode_payload(headers, body)
        except tasuki.TasukiError:
            continue
        if (len(args), list(kwargs)) in ((1, []), (0, ["n"])):
            count += 1
    return count
