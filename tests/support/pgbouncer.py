"""A pgBouncer in transaction mode in front of the test PostgreSQL, on a free port.

Debian's `pgbouncer` is installed (apt-get) when missing. It runs as the `postgres` user
when the tests run as root (pgBouncer refuses root), trusting every connection like the
test server does.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tasuki.testing.servers import free_port

BINARY = "/usr/sbin/pgbouncer"


def ensure_installed() -> str:
    found = shutil.which("pgbouncer") or (BINARY if os.path.exists(BINARY) else None)
    if found:
        return found
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "pgbouncer"],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    return BINARY


class PgBouncer:
    def __init__(self, server_port: int) -> None:
        self.server_port = server_port
        self.port = 0
        self.dir = Path(tempfile.mkdtemp(prefix="tasuki-pgbouncer-"))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> PgBouncer:
        binary = ensure_installed()
        self.port = free_port()
        ini = self.dir / "pgbouncer.ini"
        users = self.dir / "users.txt"
        users.write_text('"postgres" ""\n')
        ini.write_text(
            "[databases]\n"
            f"* = host=127.0.0.1 port={self.server_port}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            f"unix_socket_dir = {self.dir}\n"
            "auth_type = trust\n"
            f"auth_file = {users}\n"
            "pool_mode = transaction\n"
            "default_pool_size = 4\n"
            "max_client_conn = 200\n"
            f"logfile = {self.dir / 'pgbouncer.log'}\n"
        )
        argv = [binary, str(ini)]
        if os.geteuid() == 0:  # pgBouncer will not run as root
            shutil.chown(self.dir, "postgres")
            for path in (ini, users):
                shutil.chown(path, "postgres")
            argv = ["runuser", "-u", "postgres", "--", *argv]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    log = self.dir / "pgbouncer.log"
                    raise RuntimeError(
                        "pgbouncer did not start: "
                        + (log.read_text() if log.exists() else "no log")
                    ) from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)
