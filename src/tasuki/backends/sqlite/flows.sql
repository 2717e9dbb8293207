-- Workflows (`sql/flows.py`): flow records, barriers and their slots.

-- name: flow_start
-- A new flow, or one in place of an expired record of the same id; no row if it exists.
INSERT INTO tasuki_flows (id, static, created_at, expires_at)
VALUES (:id, :static, :created_at, :expires_at)
ON CONFLICT (id) DO UPDATE
SET static = excluded.static, created_at = excluded.created_at,
    expires_at = excluded.expires_at, result = NULL, failure = NULL, cancelled = 0
WHERE tasuki_flows.expires_at <= :now;

-- name: flow
SELECT static, result, failure, cancelled FROM tasuki_flows
WHERE id = :id AND expires_at > :now;

-- name: flow_cancel
UPDATE tasuki_flows SET cancelled = 1 WHERE id = :id AND expires_at > :now;

-- name: flow_cancelled
SELECT cancelled FROM tasuki_flows WHERE id = :id AND expires_at > :now;

-- name: flow_fail
-- The first failure only.
UPDATE tasuki_flows SET failure = :failure
WHERE id = :id AND failure IS NULL AND expires_at > :now;

-- name: flows_redrive_all
-- Before `redrive_all`: a flow whose first failure is one of the dead letters it sends
-- back runs again, in the same transaction, so every reader sees the resumed flow
-- (`tasuki_flows_failed` holds only the flows that have a failure).
UPDATE tasuki_flows SET failure = NULL
WHERE failure IS NOT NULL AND expires_at > :now
  AND json_extract(failure, '$.queue') = :queue
  AND EXISTS (
    SELECT 1 FROM tasuki_messages m
    WHERE m.queue = :queue AND m.id = json_extract(tasuki_flows.failure, '$.message_id')
      AND m.state = 2);

-- name: flows_redrive_ids
UPDATE tasuki_flows SET failure = NULL
WHERE failure IS NOT NULL AND expires_at > :now
  AND json_extract(failure, '$.queue') = :queue
  AND json_extract(failure, '$.message_id') IN (SELECT value FROM json_each(:ids))
  AND EXISTS (
    SELECT 1 FROM tasuki_messages m
    WHERE m.queue = :queue AND m.id = json_extract(tasuki_flows.failure, '$.message_id')
      AND m.state = 2);

-- name: flow_finish
UPDATE tasuki_flows SET result = :value
WHERE id = :id AND result IS NULL AND expires_at > :now;

-- name: flow_barrier
-- The barrier's row, made by its first fill (SQLite's one writer makes fills take turns).
INSERT INTO tasuki_flow_barriers (flow, barrier, size, expires_at)
VALUES (:flow, :barrier, :size, :expires_at)
ON CONFLICT (flow, barrier) DO NOTHING;

-- name: flow_fill
-- First writer wins the slot: a second write of it changes nothing.
INSERT INTO tasuki_flow_slots (flow, barrier, slot, value, expires_at)
VALUES (:flow, :barrier, :slot, :value, :expires_at)
ON CONFLICT (flow, barrier, slot) DO NOTHING;

-- name: flow_slot_taken
-- Run only after `flow_fill` took a slot, in its transaction, under the barrier's lock:
-- the number of slots filled, kept with the set rather than counted from it each time.
UPDATE tasuki_flow_barriers SET filled = filled + 1
WHERE flow = :flow AND barrier = :barrier RETURNING filled;

-- name: flow_slots
SELECT value FROM tasuki_flow_slots WHERE flow = :flow AND barrier = :barrier ORDER BY slot;

-- name: flow_barrier_value
UPDATE tasuki_flow_barriers SET value = :value WHERE flow = :flow AND barrier = :barrier;

-- name: flow_group_value
SELECT value FROM tasuki_flow_barriers
WHERE flow = :flow AND barrier = :barrier AND expires_at > :now;

-- name: flow_slots_forget_expired
-- Maintenance (`FlowsCleaner`): at most `:limit` rows past their time, per table.
DELETE FROM tasuki_flow_slots WHERE (flow, barrier, slot) IN (
    SELECT flow, barrier, slot FROM tasuki_flow_slots WHERE expires_at <= :now LIMIT :limit
);

-- name: flow_barriers_forget_expired
DELETE FROM tasuki_flow_barriers WHERE (flow, barrier) IN (
    SELECT flow, barrier FROM tasuki_flow_barriers WHERE expires_at <= :now LIMIT :limit
);

-- name: flows_forget_expired
DELETE FROM tasuki_flows WHERE id IN (
    SELECT id FROM tasuki_flows WHERE expires_at <= :now LIMIT :limit
);
