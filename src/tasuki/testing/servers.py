"""Real servers the tests and benchmarks start themselves, on free ports, in temp directories.

Tests never rely on a service the machine happens to run: what they kill or restart
must be theirs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def free_cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000, fixed by Redis) is free too."""
    for _ in range(200):
        port = free_port()
        if port > 65535 - 10000:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


class RedisServer:
    """A redis-server process of our own; `restart()` keeps its port and data directory."""

    def __init__(
        self,
        workdir: Path,
        *,
        appendonly: bool = False,
        appendfsync: str = "always",
        extra: list[str] | None = None,
        port: int | None = None,
    ):
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed; ./dev test installs it")
        self.binary = binary
        self.workdir = workdir
        self.port = port or free_port()
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.extra = extra or []
        self.process: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)

    def command(self) -> list[str]:
        return [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.workdir),
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            self.appendfsync,
            "--daemonize",
            "no",
            "--logfile",
            str(self.workdir / "redis.log"),
            *self.extra,
        ]

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL)
        wait_for_port(self.port)
        return self

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self) -> None:
        self.kill()
        self.start()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RedisCluster:
    """A local Redis Cluster of `masters` redis-servers (no replicas), ours to stop.

    Each node runs in its own directory with `--cluster-enabled yes`; `redis-cli
    --cluster create` assigns the 16384 slots evenly, and `start()` returns once every
    node reports `cluster_state:ok`.
    """

    def __init__(self, workdir: Path, masters: int = 3) -> None:
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RuntimeError("redis-cli is not installed; it comes with redis-server")
        self.cli = cli
        self.nodes = [
            RedisServer(
                workdir / f"node-{n}",
                extra=["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"],
                port=free_cluster_port(),
            )
            for n in range(masters)
        ]

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    def url(self) -> str:
        return self.nodes[0].url()

    def start(self) -> RedisCluster:
        for node in self.nodes:
            node.start()
        addresses = [f"127.0.0.1:{port}" for port in self.ports]
        subprocess.run(
            [
                self.cli,
                "--cluster",
                "create",
                *addresses,
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
        )
        deadline = time.monotonic() + 20
        while not all(self._ok(port) for port in self.ports):
            if time.monotonic() > deadline:
                raise TimeoutError("the Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.1)
        return self

    def _ok(self, port: int) -> bool:
        out = subprocess.run(
            [self.cli, "-p", str(port), "cluster", "info"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout
        return "cluster_state:ok" in out

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> RedisCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


class PostgresServer:
    """A PostgreSQL to test against: the one on 127.0.0.1:5432 when it answers, else a
    cluster of our own on a free port (Debian's postgresql, installed if missing).

    `url(schema)` names a schema of its own for each store; `drop_schemas()` removes
    every schema handed out, at the end of the session.
    """

    def __init__(self, workdir: Path, *, own: bool = False) -> None:
        self.workdir = workdir
        self.own = own  # always a cluster of our own (tests that restart the server)
        self.process_dir: Path | None = None
        self.port = 5432
        self.schemas: list[str] = []
        self._run_as: list[str] = []
        self._bindir = Path()
        self._scratch: Path | None = None

    @staticmethod
    def _answers(port: int) -> bool:
        try:
            import psycopg

            with psycopg.connect(
                f"postgresql://postgres@127.0.0.1:{port}/postgres", connect_timeout=2
            ):
                return True
        except Exception:
            return False

    def start(self) -> PostgresServer:
        """Find or make the server; after `kill()`, start ours again on its data."""
        if self.process_dir is not None:
            self._launch()
            return self
        if not self.own and self._answers(5432):
            return self
        self._bindir = _postgres_bindir()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        if os.geteuid() == 0:  # initdb and postgres refuse to run as root
            self._run_as = ["runuser", "-u", "postgres", "--"]
            # pytest's temporary directories are root's alone: postgres needs its own.
            self._scratch = self.workdir = Path(tempfile.mkdtemp(prefix="tasuki-pg-"))
            shutil.chown(self.workdir, "postgres")
        self.process_dir = self.workdir / "data"
        initdb = str(self._bindir / "initdb")
        subprocess.run(
            [*self._run_as, initdb, "-D", str(self.process_dir), "-U", "postgres", "-A", "trust"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        self._launch()
        createdb = str(self._bindir / "createdb")
        subprocess.run(
            [
                *self._run_as,
                createdb,
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "test",
            ],
            check=True,
        )
        return self

    def _launch(self) -> None:
        options = f"-p {self.port} -k {self.workdir} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = str(self.workdir / "postgres.log")
        self._pg_ctl("-l", log, "-o", options, "-w", "start")

    def kill(self) -> None:
        """Stop our server at once, as a crash would (committed data survives)."""
        self._pg_ctl("-m", "immediate", "-w", "stop")

    def url(self, schema: str) -> str:
        self.schemas.append(schema)
        return f"postgresql://postgres@127.0.0.1:{self.port}/test?schema={schema}"

    def drop_schemas(self) -> None:
        import psycopg

        with psycopg.connect(
            f"postgresql://postgres@127.0.0.1:{self.port}/test", autocommit=True
        ) as conn:
            for schema in self.schemas:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        self.schemas.clear()

    def _pg_ctl(self, *args: str, check: bool = True) -> None:
        assert self.process_dir is not None, "not a cluster of our own"
        subprocess.run(
            [*self._run_as, str(self._bindir / "pg_ctl"), "-D", str(self.process_dir), *args],
            check=check,
            stdout=subprocess.DEVNULL,
        )

    def restart(self) -> None:
        """Stop at once (as a crash would) and start again on the same port and data."""
        self.kill()
        self.start()

    def stop(self) -> None:
        if self.process_dir is not None:
            self._pg_ctl("-m", "immediate", "-w", "stop", check=False)
            self.process_dir = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


def _postgres_bindir() -> Path:
    """Debian's PostgreSQL binaries, installed with apt-get when missing."""
    for _ in range(2):
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if found:
            return found[-1].parent
        subprocess.run(
            "apt-get update -qq && "
            "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql",
            shell=True,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    raise RuntimeError("PostgreSQL is not installed and apt-get could not install it")


class MotoServer:
    """moto's SQS-compatible HTTP server (`moto_server`) of our own, on a free port.

    It keeps everything in memory; stopping it (by its pid) forgets every queue.
    """

    def __init__(self) -> None:
        binary = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
        if not Path(binary).exists():
            raise RuntimeError("moto_server is not installed; it comes with tasuki[dev]")
        self.binary = binary
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoServer:
        self.process = subprocess.Popen(
            [self.binary, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, 30.0)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(10)

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# Credentials for the local server only: it accepts any, and boto3 wants some.
DUMMY_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
