-- Named queries of the durable steps a SQLite lock store keeps for SQS
-- (`StepRecords`, sqlite_steps.py), in tables of their own beside `tasuki_sqs_records`,
-- whose lease records fence them. `key` is the records' namespace + `steps:QUEUE:ID`;
-- times are seconds since the epoch (`:now` is the caller's clock).

-- name: create_steps
CREATE TABLE IF NOT EXISTS tasuki_sqs_steps (
    key TEXT NOT NULL,
    name TEXT NOT NULL,
    occurrence INTEGER NOT NULL,
    result BLOB NOT NULL,
    started_at REAL NOT NULL,
    duration REAL NOT NULL,
    expires REAL NOT NULL,
    PRIMARY KEY (key, name, occurrence)
) WITHOUT ROWID;

-- name: create_signals
CREATE TABLE IF NOT EXISTS tasuki_sqs_signals (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    name TEXT NOT NULL,
    payload BLOB NOT NULL,
    expires REAL NOT NULL
);

-- name: create_signals_index
CREATE INDEX IF NOT EXISTS tasuki_sqs_signals_key ON tasuki_sqs_signals (key, name, seq);

-- name: create_waits
-- A message's last wait: its number `seq`, `state` (steps.py: WaitState), the signal
-- it waits for ('' a sleep), `until` its wake-up, and the SQS queue `url` and
-- SendMessage `entry` (JSON) of the copy a signal sends ('' once not needed); `handle`
-- the receipt handle of its hidden copy on a FIFO queue ('' none known).
CREATE TABLE IF NOT EXISTS tasuki_sqs_waits (
    key TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    state TEXT NOT NULL,
    signal TEXT NOT NULL,
    until REAL NOT NULL,
    url TEXT NOT NULL,
    entry TEXT NOT NULL,
    expires REAL NOT NULL,
    handle TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;

-- name: add_waits_handle
-- A lock database made before waits kept a hidden copy's handle gets the column.
ALTER TABLE tasuki_sqs_waits ADD COLUMN handle TEXT NOT NULL DEFAULT '';

-- name: waits_columns
SELECT name FROM pragma_table_info('tasuki_sqs_waits');

-- name: lease_current
SELECT 1 FROM tasuki_sqs_records WHERE key = :lease AND owner = :token AND expires > :now;

-- name: id_live
-- The message lives: its id record is held by its enqueue (not finished).
SELECT 1 FROM tasuki_sqs_records WHERE key = :id AND owner != '' AND expires > :now;

-- name: read_steps
SELECT name, occurrence, result, started_at, duration FROM tasuki_sqs_steps
WHERE key = :key AND expires > :now ORDER BY started_at, name, occurrence;

-- name: put_step
INSERT OR REPLACE INTO tasuki_sqs_steps
    (key, name, occurrence, result, started_at, duration, expires)
VALUES (:key, :name, :occurrence, :result, :started_at, :duration, :expires);

-- name: first_signal
SELECT seq, payload FROM tasuki_sqs_signals
WHERE key = :key AND name = :name AND expires > :now ORDER BY seq LIMIT 1;

-- name: drop_signal
DELETE FROM tasuki_sqs_signals WHERE seq = :seq;

-- name: put_signal
INSERT INTO tasuki_sqs_signals (key, name, payload, expires)
VALUES (:key, :name, :payload, :expires);

-- name: read_wait
SELECT seq, state, signal, until, url, entry, handle FROM tasuki_sqs_waits WHERE key = :key;

-- name: put_wait
-- The next wait of the message: numbered one more than the last (a copy of an older
-- one is refused), kept at least until it wakes.
INSERT INTO tasuki_sqs_waits (key, seq, state, signal, until, url, entry, expires)
VALUES (:key, 1, 'pending', :signal, :until, :url, :entry, :expires)
ON CONFLICT (key) DO UPDATE SET
    seq = seq + 1, state = 'pending', signal = excluded.signal, until = excluded.until,
    url = excluded.url, entry = excluded.entry, expires = max(expires, excluded.expires),
    handle = ''
RETURNING seq;

-- name: set_wait
UPDATE tasuki_sqs_waits SET state = :state, entry = :entry
WHERE key = :key AND seq = :seq AND state = :was;

-- name: put_handle
-- The copy of the wait, hidden until its wake-up (FIFO): its receipt handle, kept only
-- while the wait is the message's last and not woken.
UPDATE tasuki_sqs_waits SET handle = :handle
WHERE key = :key AND seq = :seq AND state IN ('pending', 'waiting');

-- name: count_hidden
-- The copies in one SQS queue hidden until their wake-up (FIFO), not yet woken.
SELECT COUNT(*) FROM tasuki_sqs_waits
WHERE url = :url AND handle != '' AND state IN ('pending', 'waiting') AND until > :now;

-- name: placed
-- The copy that sleeps was sent and the leased one deleted: the message waits now.
UPDATE tasuki_sqs_waits SET state = 'waiting' WHERE key = :key AND seq = :seq AND state = 'pending';

-- name: drop_steps
DELETE FROM tasuki_sqs_steps WHERE key = :key;

-- name: drop_signals
DELETE FROM tasuki_sqs_signals WHERE key = :key;

-- name: end_wait
-- The message is gone: its wait wakes it no more, and only its number and state stay
-- (to refuse its delayed copy) until it would have woken.
UPDATE tasuki_sqs_waits
SET state = CASE WHEN state IN ('pending', 'waiting') THEN 'ended' ELSE state END, entry = '',
    handle = '', expires = until + 3600
WHERE key = :key;

-- name: sweep_steps
DELETE FROM tasuki_sqs_steps WHERE expires <= :now;

-- name: sweep_signals
DELETE FROM tasuki_sqs_signals WHERE expires <= :now;

-- name: sweep_waits
DELETE FROM tasuki_sqs_waits WHERE expires <= :now;
