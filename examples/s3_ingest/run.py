"""One command, end to end: `python -m examples.s3_ingest.run [--objects 50] [--kill-one]`.

Starts a local S3+SQS server (`moto_server`, from `tasuki[dev]`) on a free loopback port
unless S3_ENDPOINT is set, creates the bucket and the tasuki queue, points the bucket's
event notifications at the queue, starts worker processes
(`tasuki worker examples.s3_ingest.app:app`), PUTs the objects (one of them not valid
UTF-8), optionally SIGKILLs a worker in the middle of an object and starts another, waits
until every row is `processed`, stops the workers with SIGTERM and prints a summary (the
last line is JSON; `taken_over` counts the objects the killed worker was in the middle of
that another run finished).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "uploads"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    binary = str(Path(sys.executable).parent / "moto_server")
    proc = subprocess.Popen(
        [binary, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise
            time.sleep(0.05)


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tasuki", "worker", "examples.s3_ingest.app:app", "-c", "4"],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=out,
        )


def rows(db: Path) -> list[tuple[Any, ...]]:
    if not db.exists():
        return []
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute(
            "SELECT key, state, lines, error, completions, owner FROM objects"
        ).fetchall()
    except sqlite3.OperationalError:  # the table is not there yet
        return []
    finally:
        con.close()


def running(db: Path, pid: int) -> set[str]:
    """The objects a worker process is in the middle of (rows `processing`, owned by it)."""
    return {r[0] for r in rows(db) if r[1] == "processing" and r[5].startswith(f"{pid}-")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m examples.s3_ingest.run", description=__doc__)
    p.add_argument("--objects", type=int, default=50)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--kill-one", action="store_true", help="SIGKILL a worker midway")
    p.add_argument("--timeout", type=float, default=120.0)
    args = p.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="s3-ingest-"))
    server = None
    env = dict(os.environ)
    if not env.get("S3_ENDPOINT"):
        env.update(
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
            AWS_SESSION_TOKEN="testing",
            AWS_DEFAULT_REGION="us-east-1",
        )
        server, endpoint = start_server()
        env["S3_ENDPOINT"] = endpoint
        env["TASUKI_URL"] = (
            f"sqs://us-east-1?endpoint_url={endpoint}&locks=sqlite:///{work / 'locks.db'}"
        )
    env["INGEST_DB"] = str(work / "ingest.db")
    if args.kill_one:  # slow objects down, so the kill lands in the middle of some
        env.setdefault("INGEST_CHUNK", "256")
        env.setdefault("INGEST_CHUNK_DELAY", "0.05")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "src"), env.get("PYTHONPATH", "")])
    os.environ.update(env)
    workers: list[subprocess.Popen[bytes]] = []
    killed = False
    cut_short: set[str] = set()
    try:
        import boto3

        import tasuki

        setup = tasuki.App(env["TASUKI_URL"])
        arn = setup.backend.queue_arn("s3-events")  # type: ignore[attr-defined]
        setup.close()
        s3 = boto3.client("s3", endpoint_url=env["S3_ENDPOINT"])
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_notification_configuration(
            Bucket=BUCKET,
            NotificationConfiguration={
                "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*"]}]
            },
        )
        log = work / "workers.log"
        workers = [start_worker(env, log) for _ in range(args.workers)]
        for n in range(args.objects):
            # Keys with spaces and non-ASCII arrive URL-encoded in notifications.
            key = f"incoming/report {n:03d} é.csv"
            body = (
                b"\xff\xfe not utf-8\n"
                if n == 7
                else "".join(f"row {i} of {n}\n" for i in range(100 + n)).encode()
            )
            s3.put_object(Bucket=BUCKET, Key=key, Body=body)
            if args.kill_one and n == args.objects // 2:
                victim = workers[0]
                busy_until = time.monotonic() + 30  # until it is in the middle of an object
                while not running(work / "ingest.db", victim.pid):
                    if time.monotonic() > busy_until:
                        break
                    time.sleep(0.02)
                victim.send_signal(signal.SIGKILL)
                victim.wait(10)
                killed = True
                cut_short = running(work / "ingest.db", victim.pid)
                workers.append(start_worker(env, log))
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            found = rows(work / "ingest.db")
            if len(found) == args.objects and all(r[1] == "processed" for r in found):
                break
            time.sleep(0.5)
    finally:
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.wait(30)
            except subprocess.TimeoutExpired:
                w.kill()
        if server is not None:
            os.kill(server.pid, signal.SIGTERM)
            server.wait(10)
    found = rows(work / "ingest.db")
    processed = sum(1 for r in found if r[1] == "processed")
    print(f"{processed} of {args.objects} objects processed; rows in {work / 'ingest.db'}")
    for key, state, lines, error, completions, _ in sorted(found)[:5]:
        print(f"  {key!r}: {state}, {lines} lines, completions={completions}, error={error}")
    summary = {
        "objects": args.objects,
        "rows": len(found),
        "processed": processed,
        "max_completions": max((r[4] for r in found), default=0),
        "invalid": sum(1 for r in found if r[3]),
        "killed": killed,
        # Objects the killed worker was in the middle of, finished later by another run.
        "taken_over": sum(
            1 for r in found if r[0] in cut_short and r[1] == "processed" and r[4] == 1
        ),
    }
    print(orjson.dumps(summary).decode())
    return 0 if processed == args.objects and summary["max_completions"] == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
