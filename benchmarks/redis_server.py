"""The harness's own redis-server: a free port on 127.0.0.1, no persistence, never 6379."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis

from benchmarks import procs


def free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port != 6379:  # never anything that looks like the machine's own Redis
            return port


class RedisServer:
    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server not found (./dev bench installs it)")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        argv = [
            binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(workdir),
            "--logfile", str(workdir / "redis.log"),
            "--maxclients", "10000",
        ]  # fmt: skip
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True
        )
        procs.track(self._proc)
        self.client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self._proc.poll() is not None:
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.05)
        self.version = str(self.client.info("server")["redis_version"])

    @property
    def pid(self) -> int:
        return self._proc.pid

    def cpu_seconds(self) -> float:
        return procs.process_cpu_seconds(self._proc.pid)

    def flush(self) -> None:
        self.client.flushall()

    def stop(self) -> None:
        self.client.close()
        procs.kill_session(self._proc, grace=2.0)
