-- Named queries of the lease and id records a SQLite lock store keeps
-- (`LeaseRecords`, SQS's with `locks=sqlite://`; sqlite.py), in
-- a table of their own in the lock database. `key` is the records' namespace +
-- `lease:QUEUE:ID` or `id:QUEUE:ID`; times are seconds since the epoch (`:now` is the
-- caller's clock, one instant per batch).

-- name: create_table
-- A lease record: `owner` the lease token ('' once settled), `lease_until` when that
-- lease (or an ack's grace) ends, `copy` the SQS MessageId leased, `receives` the
-- leases granted on that copy (0: not counted), `fence` the last lease's fencing
-- number, `progress` the current lease's progress (JSON, '' for none). A cancelled
-- message's `owner` is '~cancelled~' + the token of the lease that ran then. An id
-- record: `owner` the id's random owner, '' once the message is finished. A result
-- record: `owner` its state (pending, ok, failed), `lease_until` the message's
-- keep_result in seconds, `value` its JSON.
CREATE TABLE IF NOT EXISTS tasuki_sqs_records (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires REAL NOT NULL,
    fence INTEGER NOT NULL DEFAULT 0,
    lease_until REAL NOT NULL DEFAULT 0,
    copy TEXT NOT NULL DEFAULT '',
    receives INTEGER NOT NULL DEFAULT 0,
    progress TEXT NOT NULL DEFAULT '',
    value BLOB
) WITHOUT ROWID;

-- name: columns
SELECT name FROM pragma_table_info('tasuki_sqs_records');

-- name: add_copy
-- A table made before the column.
ALTER TABLE tasuki_sqs_records ADD COLUMN copy TEXT NOT NULL DEFAULT '';

-- name: add_receives
ALTER TABLE tasuki_sqs_records ADD COLUMN receives INTEGER NOT NULL DEFAULT 0;

-- name: add_progress
ALTER TABLE tasuki_sqs_records ADD COLUMN progress TEXT NOT NULL DEFAULT '';

-- name: add_value
ALTER TABLE tasuki_sqs_records ADD COLUMN value BLOB;

-- name: sweep
DELETE FROM tasuki_sqs_records WHERE expires <= :now;

-- name: read_lease
SELECT fence, owner, lease_until, expires, copy, receives
FROM tasuki_sqs_records WHERE key = :key;

-- name: write_lease
INSERT OR REPLACE INTO tasuki_sqs_records
    (key, owner, expires, fence, lease_until, copy, receives)
VALUES (:key, :owner, :expires, :fence, :lease_until, :copy, :receives);

-- name: settle_acked
-- Kept a while, with no owner, as the record of what was acked.
UPDATE tasuki_sqs_records SET owner = '', lease_until = :until, expires = :until
WHERE key = :key AND owner = :owner AND expires > :now;

-- name: mark_unsent
-- An acked step whose steps are still to be sent (UNSENT_OWNER, base.py):
-- `:unsent` is that prefix and the steps. Kept past its grace (`:expires`), so that a
-- re-run after it counts on from this lease.
UPDATE tasuki_sqs_records SET owner = :unsent, expires = :expires
WHERE key = :key AND owner = '';

-- name: steps_sent
-- `:unsent`: the prefix of every UNSENT owner. A plain acked record from now on, kept
-- for what is left of its grace.
UPDATE tasuki_sqs_records SET owner = '', expires = lease_until
WHERE key = :key AND substr(owner, 1, length(:unsent)) = :unsent;

-- name: settle_released
-- Released: kept, no owner, not live, for its count of leases (a dead-lettered message's
-- record is forgotten once the message is in the dead-letter queue).
UPDATE tasuki_sqs_records SET owner = '', lease_until = 0, expires = :expires
WHERE key = :key AND owner = :owner AND expires > :now;

-- name: renew_lease
UPDATE tasuki_sqs_records SET expires = :expires, lease_until = :until
WHERE key = :key AND owner = :owner AND expires > :now;

-- name: keep_lease
-- A renewal that stores the lease's progress (NULL keeps what is there).
UPDATE tasuki_sqs_records
SET expires = :expires, lease_until = :until, progress = coalesce(:progress, progress)
WHERE key = :key AND owner = :owner AND expires > :now;

-- name: read_record
SELECT owner, expires FROM tasuki_sqs_records WHERE key = :key AND expires > :now;

-- name: cancel_lease
-- The lease record of a cancelled message, kept as long as its id could be: a copy
-- received later is deleted, never run.
INSERT INTO tasuki_sqs_records (key, owner, expires, lease_until)
VALUES (:key, :owner, :expires, :until)
ON CONFLICT (key) DO UPDATE SET
    owner = excluded.owner, expires = excluded.expires, lease_until = excluded.lease_until,
    progress = '';

-- name: finish_id
-- A cancelled message's id: still known (its TTL unchanged), finished.
UPDATE tasuki_sqs_records SET owner = '' WHERE key = :key;

-- name: forget
DELETE FROM tasuki_sqs_records WHERE key = :key;

-- name: claim_id
-- Taken unless held: an expired record is taken over.
INSERT INTO tasuki_sqs_records (key, owner, expires) VALUES (:key, :owner, :expires)
ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires = excluded.expires
WHERE tasuki_sqs_records.expires <= :now;

-- name: keep_id
-- `:owner` '' for whoever holds it. A kept id is a finished message's: no owner.
UPDATE tasuki_sqs_records SET expires = :expires, owner = ''
WHERE key = :key AND (owner = :owner OR :owner = '');

-- name: drop_id
DELETE FROM tasuki_sqs_records WHERE key = :key AND (owner = :owner OR :owner = '');

-- name: pend_result
-- A result record made at enqueue: pending, with the message's keep_result.
INSERT OR REPLACE INTO tasuki_sqs_records (key, owner, expires, lease_until)
VALUES (:key, 'pending', :expires, :keep);

-- name: reopen_result
-- Pending again (a redrive), keeping its keep_result.
UPDATE tasuki_sqs_records SET owner = 'pending', value = NULL, expires = :expires
WHERE key = :key AND expires > :now;

-- name: settle_result
-- Settled: kept its keep_result from now.
UPDATE tasuki_sqs_records SET owner = :state, value = :value, expires = :now + lease_until
WHERE key = :key AND expires > :now;

-- name: read_result
SELECT owner, expires, value FROM tasuki_sqs_records WHERE key = :key AND expires > :now;

-- name: view
-- What `inspect` reads of one message: its lease record and its id record, live ones.
SELECT
    (SELECT owner FROM tasuki_sqs_records WHERE key = :lease AND expires > :now) AS lease_owner,
    (SELECT lease_until FROM tasuki_sqs_records WHERE key = :lease AND expires > :now)
        AS lease_until,
    (SELECT receives FROM tasuki_sqs_records WHERE key = :lease AND expires > :now) AS receives,
    (SELECT fence FROM tasuki_sqs_records WHERE key = :lease AND expires > :now) AS fence,
    (SELECT progress FROM tasuki_sqs_records WHERE key = :lease AND expires > :now) AS progress,
    (SELECT owner FROM tasuki_sqs_records WHERE key = :id AND expires > :now) AS id_owner,
    (SELECT expires FROM tasuki_sqs_records WHERE key = :id AND expires > :now) AS id_until;
