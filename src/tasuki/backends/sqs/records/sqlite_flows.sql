-- Named queries of the workflow records a SQLite lock store keeps for SQS
-- (`FlowRecords`; sqlite_flows.py), in tables of their own in
-- the lock database. A flow's `id` is the records' namespace + the flow id. Times are
-- seconds since the epoch (`:now` the caller's clock).

-- name: create_flows
CREATE TABLE IF NOT EXISTS tasuki_sqs_flows (
    id TEXT PRIMARY KEY,
    static BLOB NOT NULL,
    result BLOB,
    failure TEXT,
    cancelled INTEGER NOT NULL DEFAULT 0,
    expires REAL NOT NULL
) WITHOUT ROWID;

-- name: create_barriers
-- A group's barrier: `filled` its slots written (counted by the fill that wrote each, in
-- its transaction), `value` the JSON array of its slots once complete.
CREATE TABLE IF NOT EXISTS tasuki_sqs_barriers (
    flow TEXT NOT NULL,
    barrier TEXT NOT NULL,
    size INTEGER NOT NULL,
    filled INTEGER NOT NULL DEFAULT 0,
    value BLOB,
    expires REAL NOT NULL,
    PRIMARY KEY (flow, barrier)
) WITHOUT ROWID;

-- name: create_slots
-- A slot of a barrier, with the message whose settle wrote it (`writer`: QUEUE:ID), so
-- a re-run of that message knows the slot is its own.
CREATE TABLE IF NOT EXISTS tasuki_sqs_slots (
    flow TEXT NOT NULL,
    barrier TEXT NOT NULL,
    slot INTEGER NOT NULL,
    value BLOB NOT NULL,
    writer TEXT NOT NULL,
    expires REAL NOT NULL,
    PRIMARY KEY (flow, barrier, slot)
) WITHOUT ROWID;

-- name: flow_start
-- A new flow, or one in place of an expired record of the same id; no row if it exists.
INSERT INTO tasuki_sqs_flows (id, static, expires) VALUES (:id, :static, :expires)
ON CONFLICT (id) DO UPDATE
SET static = excluded.static, expires = excluded.expires, result = NULL, failure = NULL,
    cancelled = 0
WHERE tasuki_sqs_flows.expires <= :now;

-- name: flow
SELECT static, result, failure, cancelled FROM tasuki_sqs_flows
WHERE id = :id AND expires > :now;

-- name: flow_cancel
UPDATE tasuki_sqs_flows SET cancelled = 1 WHERE id = :id AND expires > :now;

-- name: flow_fail
-- The first failure only.
UPDATE tasuki_sqs_flows SET failure = :failure
WHERE id = :id AND failure IS NULL AND expires > :now;

-- name: flow_resume
-- Its failed step re-driven: the flow runs again.
UPDATE tasuki_sqs_flows SET failure = NULL
WHERE id = :id AND expires > :now AND failure IS NOT NULL
  AND json_extract(failure, '$.queue') = :queue
  AND json_extract(failure, '$.message_id') = :message_id;

-- name: flow_finish
UPDATE tasuki_sqs_flows SET result = :value
WHERE id = :id AND result IS NULL AND expires > :now;

-- name: barrier
INSERT INTO tasuki_sqs_barriers (flow, barrier, size, expires)
VALUES (:flow, :barrier, :size, :expires)
ON CONFLICT (flow, barrier) DO UPDATE
SET size = excluded.size, expires = excluded.expires, filled = 0, value = NULL
WHERE tasuki_sqs_barriers.expires <= :now;

-- name: fill
-- First writer wins the slot: a second write of it changes nothing.
INSERT INTO tasuki_sqs_slots (flow, barrier, slot, value, writer, expires)
VALUES (:flow, :barrier, :slot, :value, :writer, :expires)
ON CONFLICT (flow, barrier, slot) DO NOTHING;

-- name: slot_writer
SELECT writer FROM tasuki_sqs_slots WHERE flow = :flow AND barrier = :barrier AND slot = :slot;

-- name: slot_taken
UPDATE tasuki_sqs_barriers SET filled = filled + 1 WHERE flow = :flow AND barrier = :barrier;

-- name: slot_count
-- How many slots are filled: kept on the barrier, never counted row by row (a group of
-- n members would read n²/2 slot rows).
SELECT filled FROM tasuki_sqs_barriers WHERE flow = :flow AND barrier = :barrier;

-- name: slots
SELECT value FROM tasuki_sqs_slots WHERE flow = :flow AND barrier = :barrier ORDER BY slot;

-- name: barrier_value
UPDATE tasuki_sqs_barriers SET value = :value WHERE flow = :flow AND barrier = :barrier;

-- name: group_value
SELECT value FROM tasuki_sqs_barriers
WHERE flow = :flow AND barrier = :barrier AND expires > :now;

-- name: claim_send
-- An id claimed for the message `:owner` ('~send~' + its sender) is about to send:
-- taken if free or expired, or still this sender's unsent claim.
INSERT INTO tasuki_sqs_records (key, owner, expires) VALUES (:key, :owner, :expires)
ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires = excluded.expires
WHERE tasuki_sqs_records.expires <= :now OR tasuki_sqs_records.owner = excluded.owner;

-- name: sent
UPDATE tasuki_sqs_records SET owner = :sent WHERE key = :key AND owner = :owner;

-- name: mark_dead
-- A step dead-lettered (`:key` its dead-step record), kept as long as its flow.
INSERT OR REPLACE INTO tasuki_sqs_records (key, owner, expires) VALUES (:key, 'dead', :expires);

-- name: unmark_dead
DELETE FROM tasuki_sqs_records WHERE key = :key;

-- name: step_state
-- What the records tell of a step: its dead-step record, its lease record, its id record.
SELECT
    (SELECT count(*) FROM tasuki_sqs_records WHERE key = :dead AND expires > :now) AS dead,
    (SELECT owner FROM tasuki_sqs_records
     WHERE key = :lease AND expires > :now AND lease_until > :now) AS leased,
    (SELECT receives FROM tasuki_sqs_records WHERE key = :lease AND expires > :now) AS receives,
    (SELECT owner FROM tasuki_sqs_records WHERE key = :id AND expires > :now) AS known;

-- name: sweep_flows
DELETE FROM tasuki_sqs_flows WHERE expires <= :now;

-- name: sweep_barriers
DELETE FROM tasuki_sqs_barriers WHERE expires <= :now;

-- name: sweep_slots
DELETE FROM tasuki_sqs_slots WHERE expires <= :now;
