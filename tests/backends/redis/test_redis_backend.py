"""What only the Redis backend has: its URLs, its connection handling, its scripts.

The lifecycle itself is the shared contract suite's business (`any_url` runs it on
Redis too); these tests cover the ways a Redis deployment goes wrong.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tasuki import errors
from tasuki.backends.base import Backend, Envelope
from tasuki.backends.redis import options, resp
from tasuki.backends.redis.slots import crc16, key_slot
from tasuki.backends.urls import backend_from_url
from tasuki.testing.servers import RedisServer, free_port
from tests.support.processes import env_with_src


def _envelope(queue: str, body: bytes = b"{}") -> Envelope:
    return Envelope(queue=queue, id=uuid.uuid4().hex, body=body, headers={}, max_attempts=3)


@pytest.fixture
def backend(redis_server: RedisServer) -> Iterator[Backend]:
    b = backend_from_url(f"{redis_server.url()}?prefix=t-{uuid.uuid4().hex[:12]}:")
    yield b
    b.close()


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("redis://localhost:6379/abc", "invalid redis database"),
        ("redis://localhost:6379/0?unknown=1", "unknown"),
        ("redis://localhost:6379/0?socket_timeout=-1", "socket_timeout"),
        ("redis://localhost:6379/0?prefix=a{b}", "braces"),
        ("unix://", "socket path"),
        ("redis://localhost:6379/1?cluster=yes", "only database 0"),
        ("redis://localhost:notaport/0", "invalid redis URL"),
    ],
)
def test_bad_urls_are_refused_with_the_reason(url: str, fragment: str) -> None:
    with pytest.raises(errors.InvalidURL, match=fragment):
        backend_from_url(url).stats("q")


def test_url_options_and_masked_password() -> None:
    opts = options.parse_url("rediss://user:s3cret@cache.example:6380/2?ssl_cert_reqs=none")
    assert opts.connection["host"] == "cache.example"
    assert opts.connection["port"] == 6380
    assert opts.connection["db"] == 2
    assert opts.connection["ssl"] is True
    assert opts.connection["ssl_cert_reqs"] == "none"
    assert "s3cret" not in opts.url
    unix = options.parse_url("unix:///run/redis.sock?db=3&prefix=app:")
    assert unix.connection["unix_socket_path"] == "/run/redis.sock"
    assert unix.connection["db"] == 3
    assert unix.prefix == "app:"


def test_unreachable_server_is_a_clear_error() -> None:
    b = backend_from_url(f"redis://127.0.0.1:{free_port()}/0?socket_timeout=1")
    with pytest.raises(errors.BackendUnavailable, match="unreachable"):
        b.enqueue([_envelope("q")])
    b.close()


def test_scripts_are_loaded_again_after_script_flush(
    backend: Backend, redis_server: RedisServer
) -> None:
    backend.enqueue([_envelope("q")])
    redis.Redis(port=redis_server.port).script_flush()
    backend.enqueue([_envelope("q")])
    assert len(backend.lease("q", 10, 30.0)) == 2


def test_a_lease_under_way_survives_a_script_flush(
    backend: Backend, redis_server: RedisServer
) -> None:
    """The early lease's EVALSHA meets NOSCRIPT after a flush: finishing it loads the
    script and leases the usual way."""
    backend.enqueue([_envelope("q") for _ in range(3)])
    redis.Redis(port=redis_server.port).script_flush()
    finish = backend.lease_soon("q", 2, 30.0)
    assert len(finish()) == 2
    assert len(backend.lease_soon("q", 5, 30.0)()) == 1


def test_a_large_enqueue_is_pipelined_in_order(backend: Backend) -> None:
    """Several script calls on one socket, each sent before the last one's reply: Redis
    runs them in order, so the batch keeps its enqueue order."""
    from tasuki.backends.redis.producing import PIPELINED

    [first] = backend.enqueue([_envelope("q")])  # scripts loaded: no fallback below
    batch = [_envelope("q") for _ in range(2 * PIPELINED + 17)]
    results = backend.enqueue(batch)
    assert [r.status for r in results] == ["enqueued"] * len(batch)
    leased = backend.lease("q", len(batch) + 1, 30.0)
    assert [d.id for d in leased] == [first.id, *(e.id for e in batch)]


@pytest.mark.parametrize("trouble", ["script flush", "client kill"])
def test_a_pipelined_enqueue_recovers_from_a_flush_or_a_lost_socket(
    backend: Backend, redis_server: RedisServer, trouble: str
) -> None:
    from tasuki.backends.redis.producing import PIPELINED

    backend.enqueue([_envelope("q")])  # a pooled socket, scripts loaded
    admin = redis.Redis(port=redis_server.port)
    if trouble == "script flush":
        admin.script_flush()
    else:
        assert admin.client_kill_filter(_type="normal", skipme=True) >= 1
    batch = [_envelope("q") for _ in range(3 * PIPELINED)]
    results = backend.enqueue(batch)
    assert [r.id for r in results] == [e.id for e in batch]
    assert {r.status for r in results} == {"enqueued"}
    assert backend.stats("q").ready == 1 + len(batch)


def test_a_killed_connection_is_replaced_transparently(
    backend: Backend, redis_server: RedisServer
) -> None:
    backend.enqueue([_envelope("q")])
    admin = redis.Redis(port=redis_server.port)
    killed = admin.client_kill_filter(_type="normal", skipme=True)
    assert killed >= 1
    backend.enqueue([_envelope("q")])
    assert backend.stats("q").ready == 2


def test_an_error_reply_fails_that_call_only(backend: Backend, redis_server: RedisServer) -> None:
    """A key of the wrong type (someone else's data under our prefix) is a BackendError
    naming the server; the connection stays good for the next call."""
    prefix = backend.keys.prefix  # type: ignore[attr-defined]
    redis.Redis(port=redis_server.port).set(f"{prefix}{{broken}}:waiting", "not a zset")
    with pytest.raises(errors.BackendError, match="WRONGTYPE"):
        backend.enqueue([_envelope("broken")])
    backend.enqueue([_envelope("fine")])
    assert backend.stats("fine").ready == 1


def _round_trip(url: str, body: bytes) -> None:
    """Enqueue, lease and ack one message through a backend made from `url`."""
    b = backend_from_url(url)
    try:
        b.enqueue([_envelope("q", body)])
        (d,) = b.lease("q", 1, 30.0)
        assert d.body == body
        assert b.ack([d.receipt]) == [True]
    finally:
        b.close()


def test_unix_socket_url(tmp_path: Path) -> None:
    sock = tmp_path / "redis.sock"
    with RedisServer(tmp_path / "srv", extra=["--unixsocket", str(sock)]):
        _round_trip(f"unix://{sock}?db=1", b"over a socket")


def _certificates(where: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it."""
    ca_key, ca, key, csr, cert = (
        where / n for n in ("ca.key", "ca.crt", "s.key", "s.csr", "s.crt")
    )
    ext = where / "san.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(ca_key), "-out", str(ca), "-subj", "/CN=tasuki test CA")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
            "-subj", "/CN=127.0.0.1")  # fmt: skip
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
            "-CAcreateserial", "-out", str(cert), "-days", "1", "-extfile", str(ext))  # fmt: skip
    return ca, cert, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_rediss_url_over_tls(tmp_path: Path) -> None:
    ca, cert, key = _certificates(tmp_path)
    port = free_port()
    server = RedisServer(
        tmp_path / "srv",
        port=port,
        extra=[
            "--port", "0", "--tls-port", str(port), "--tls-cert-file", str(cert),
            "--tls-key-file", str(key), "--tls-ca-cert-file", str(ca),
            "--tls-auth-clients", "no",
        ],
    )  # fmt: skip
    with server:
        _round_trip(f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={ca}", b"encrypted")
        # Without our CA the server's certificate is not trusted: a clear error.
        untrusted = backend_from_url(f"rediss://127.0.0.1:{port}/0?socket_timeout=2")
        with pytest.raises(errors.BackendUnavailable, match="certificate verify failed"):
            untrusted.stats("q")
        untrusted.close()
        # Unless the URL says to trust anything.
        _round_trip(f"rediss://127.0.0.1:{port}/0?ssl_cert_reqs=none", b"unverified")


def test_password_and_acl_user(tmp_path: Path) -> None:
    """AUTH with a password or a user; a refusal names the credentials (the worker keeps
    retrying it: the password may be fixed). The ACL user may not run INFO, which only
    costs the Cluster detection."""
    user = ["alice", "on", ">wonderland", "~*", "&*", "+@all", "-info"]
    with RedisServer(tmp_path, extra=["--requirepass", "s3cret", "--user", *user]) as server:
        _round_trip(f"redis://:s3cret@127.0.0.1:{server.port}/2", b"with a password")
        _round_trip(f"redis://alice:wonderland@127.0.0.1:{server.port}/0", b"as alice")
        for creds in (":wrong@", "alice:wrong@", "nobody:s3cret@", ""):
            b = backend_from_url(f"redis://{creds}127.0.0.1:{server.port}/0")
            with pytest.raises(errors.BackendUnavailable, match="refused the credentials"):
                b.enqueue([_envelope("q")])
            b.close()


def test_a_single_server_never_imports_redis_py(redis_server: RedisServer) -> None:
    """Start-up time: redis-py is for Redis Cluster only, so a worker on a single server
    must not pay for `import redis` (tens of ms of every worker start)."""
    url = f"{redis_server.url()}?prefix=t-{uuid.uuid4().hex[:12]}:"
    script = textwrap.dedent(
        f"""
        import sys
        from tasuki.backends.base import Envelope
        from tasuki.backends.urls import backend_from_url

        b = backend_from_url({url!r})
        b.enqueue([Envelope(queue="q", id="m1", body=b"{{}}", headers={{}}, max_attempts=3)])
        (d,) = b.lease("q", 1, 30.0)
        assert b.ack([d.receipt]) == [True]
        assert b.lease("q", 1, 30.0, wait=0.05) == []  # BLPOP
        assert b.queues() == []
        b.ping()
        b.close()
        print(sorted(m for m in sys.modules if m == "redis" or m.startswith("redis.")))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        env=env_with_src(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "[]"


def test_key_slot_matches_redis_cluster() -> None:
    assert key_slot(b"foo") == 12182
    assert key_slot(b"123456789") == 12739
    assert key_slot(b"{user1000}.following") == key_slot(b"{user1000}.followers") == 3443
    # The cases of the Cluster specification: the first `{` and the next `}`; an empty
    # tag means the whole key.
    assert key_slot(b"foo{bar}{zap}") == key_slot(b"bar")
    assert key_slot(b"foo{{bar}}zap") == key_slot(b"{bar")
    assert key_slot(b"foo{}{bar}") == crc16(b"foo{}{bar}") % 16384 != key_slot(b"bar")
    assert key_slot(b"tasuki:{q}:waiting") == key_slot(b"q")


def test_pipeline_reads_every_reply_and_keeps_errors_in_place(redis_server: RedisServer) -> None:
    key = f"t-{uuid.uuid4().hex}"
    client = resp.connect(resp.Endpoint(port=redis_server.port, timeout=2.0))
    try:
        commands = [(b"SET", key, b"v"), (b"LPUSH", key, b"x"), (b"GET", key), (b"DEL", key)]
        packed = b"".join(resp.pack_command(c) for c in commands)
        ok, wrongtype, value, deleted = client.execute_many(packed, len(commands))
        assert (ok, value, deleted) == (b"OK", b"v", 1)
        assert isinstance(wrongtype, resp.ReplyError) and wrongtype.code == "WRONGTYPE"
        with pytest.raises(resp.ReplyError) as caught:
            client.execute(resp.pack_command((b"EVALSHA", "0" * 40, 0)))
        assert caught.value.code == "NOSCRIPT"
        assert client.execute(resp.pack_command((b"PING",))) == b"PONG"  # still in step
        # A blocking command that outlives the socket timeout: the socket is given up.
        with pytest.raises(resp.TimedOut):
            client.execute(resp.pack_command((b"BLPOP", key, 5)))
        assert client.closed
    finally:
        client.close()
