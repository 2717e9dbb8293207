"""S3 objects -> S3 event notification -> SQS -> a tasuki consumer -> one database row each.

Configuration by environment:
  TASUKI_URL    the SQS queue URL, e.g. sqs://us-east-1?locks=sqlite:///locks.db
  INGEST_DB     the SQLite database of rows (default ingest.db)
  S3_ENDPOINT   an S3-compatible endpoint (default: AWS)
  INGEST_CHUNK, INGEST_CHUNK_DELAY   streaming chunk size, and a pause after each chunk
                (to make objects slow enough to crash a worker in the middle of one)

Each object's row goes `unprocessed -> processing -> processed`:
- a duplicate delivery of a processed object is skipped and logged;
- a row left `processing` by a crashed worker (its heartbeat older than STALE seconds) is
  taken over; a live one is left to its owner (the message is deferred, no attempt spent);
- the object is streamed to a temporary file, the heartbeat (and the SQS lease, which the
  worker extends on its own while the job runs) kept alive between chunks;
- on SIGTERM the worker stops taking messages; a run in the middle of an object defers
  it, so it starts again elsewhere without spending an attempt;
- an object that is not valid UTF-8 is logged and recorded as processed with its error,
  instead of failing the whole notification (which may carry several objects).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote_plus

import tasuki

log = logging.getLogger("s3_ingest")

QUEUE = "s3-events"
STALE = 10.0  # a `processing` row whose heartbeat is older than this was abandoned
CHUNK = int(os.environ.get("INGEST_CHUNK", "65536"))
# Seconds to pause after each chunk: slows processing down to show crash takeovers.
CHUNK_DELAY = float(os.environ.get("INGEST_CHUNK_DELAY", "0"))

app = tasuki.App(os.environ.get("TASUKI_URL", "sqs://us-east-1?locks=sqlite:///locks.db"))

SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    bucket TEXT NOT NULL,
    key TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'unprocessed',
    owner TEXT,
    heartbeat_at REAL,
    lines INTEGER,
    error TEXT,
    completions INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket, key)
)
"""


@contextmanager
def database() -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(os.environ.get("INGEST_DB", "ingest.db"), timeout=30, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(SCHEMA)
        yield db
    finally:
        db.close()


def s3_client() -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=os.environ.get("S3_ENDPOINT") or None)


def claim(db: sqlite3.Connection, bucket: str, key: str, owner: str) -> str:
    """Take the row for processing: 'claimed', 'done' (already processed) or 'busy'."""
    now = time.time()
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("INSERT OR IGNORE INTO objects (bucket, key) VALUES (?, ?)", (bucket, key))
        state, heartbeat = db.execute(
            "SELECT state, heartbeat_at FROM objects WHERE bucket = ? AND key = ?", (bucket, key)
        ).fetchone()
        if state == "processed":
            return "done"
        if state == "processing" and heartbeat is not None and now - heartbeat < STALE:
            return "busy"
        if state == "processing":
            log.warning("taking over %s/%s: its worker stopped beating", bucket, key)
        db.execute(
            "UPDATE objects SET state = 'processing', owner = ?, heartbeat_at = ?"
            " WHERE bucket = ? AND key = ?",
            (owner, now, bucket, key),
        )
        return "claimed"
    finally:
        db.execute("COMMIT")


def beat(db: sqlite3.Connection, bucket: str, key: str, owner: str) -> bool:
    """Refresh the heartbeat; False if another worker took the row over."""
    cur = db.execute(
        "UPDATE objects SET heartbeat_at = ? WHERE bucket = ? AND key = ? AND owner = ?"
        " AND state = 'processing'",
        (time.time(), bucket, key, owner),
    )
    return cur.rowcount == 1


def finish(
    db: sqlite3.Connection, bucket: str, key: str, owner: str, lines: int | None, error: str | None
) -> bool:
    cur = db.execute(
        "UPDATE objects SET state = 'processed', lines = ?, error = ?,"
        " completions = completions + 1 WHERE bucket = ? AND key = ? AND owner = ?"
        " AND state = 'processing'",
        (lines, error, bucket, key, owner),
    )
    return cur.rowcount == 1


def ingest_object(db: sqlite3.Connection, s3: Any, bucket: str, key: str) -> None:
    owner = f"{os.getpid()}-{uuid.uuid4().hex}"  # one run, named by its worker process
    verdict = claim(db, bucket, key, owner)
    if verdict == "done":
        log.info("skipping %s/%s: already processed (a duplicate delivery)", bucket, key)
        return
    if verdict == "busy":
        raise tasuki.Defer(delay=STALE / 2, reason=f"{bucket}/{key} is being processed")
    ctx = tasuki.current()
    with tempfile.TemporaryFile() as spool:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
        for chunk in body.iter_chunks(CHUNK):
            spool.write(chunk)
            if CHUNK_DELAY:
                time.sleep(CHUNK_DELAY)
            if ctx.should_stop:  # SIGTERM or a lost lease: let another worker do it
                raise tasuki.Defer(reason="stopping")
            if not beat(db, bucket, key, owner):
                log.warning("%s/%s was taken over; leaving it", bucket, key)
                return
        spool.seek(0)
        lines: int | None = None
        error: str | None = None
        try:
            lines = spool.read().decode("utf-8").count("\n")
        except UnicodeDecodeError as exc:
            error = f"not valid UTF-8: {exc}"
            log.error("skipping the content of %s/%s: %s", bucket, key, error)
    if finish(db, bucket, key, owner, lines, error):
        log.info("processed %s/%s (%s lines)", bucket, key, lines)


@app.consumer(QUEUE, visibility_timeout=5.0, retry=tasuki.Retry(max_attempts=5))
def on_s3_event(message: tasuki.Message) -> None:
    event = message.json()
    if "Records" not in event:  # e.g. the s3:TestEvent S3 sends when notifications are set up
        log.info("ignoring a message without Records: %s", message.text()[:200])
        return
    s3 = s3_client()
    with database() as db:
        for record in event["Records"]:
            bucket = record["s3"]["bucket"]["name"]
            key = unquote_plus(record["s3"]["object"]["key"])  # keys arrive URL-encoded
            ingest_object(db, s3, bucket, key)
