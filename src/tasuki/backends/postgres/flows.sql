-- Workflows (`sql/flows.py`): flow records, barriers and their slots.

-- name: flow_start
-- A new flow, or one in place of an expired record of the same id; no row if it exists.
INSERT INTO tasuki_flows (id, static, created_at, expires_at)
VALUES (%(id)s, %(static)s, %(created_at)s, %(expires_at)s)
ON CONFLICT (id) DO UPDATE
SET static = excluded.static, created_at = excluded.created_at,
    expires_at = excluded.expires_at, result = NULL, failure = NULL, cancelled = false
WHERE tasuki_flows.expires_at <= %(now)s;

-- name: flow
SELECT static, result, failure, cancelled FROM tasuki_flows
WHERE id = %(id)s AND expires_at > %(now)s;

-- name: flow_cancel
UPDATE tasuki_flows SET cancelled = true WHERE id = %(id)s AND expires_at > %(now)s;

-- name: flow_cancelled
-- Locked by each settle that carries the flow on, before any barrier of it: its settles
-- take turns (a shared lock here, upgraded by `flow_finish` or `flow_fail`, would
-- deadlock against a settle waiting for the barrier), and a `flow_cancel` waits for
-- those that read the flag before it, so their successors exist when it returns.
SELECT cancelled FROM tasuki_flows WHERE id = %(id)s AND expires_at > %(now)s
FOR NO KEY UPDATE;

-- name: flow_fail
-- The first failure only.
UPDATE tasuki_flows SET failure = %(failure)s
WHERE id = %(id)s AND failure IS NULL AND expires_at > %(now)s;

-- name: flow_finish
UPDATE tasuki_flows SET result = %(value)s
WHERE id = %(id)s AND result IS NULL AND expires_at > %(now)s;

-- name: flow_barrier
-- The barrier's row, made by its first fill and locked by each: the settles filling one
-- barrier take turns, each seeing the slots of those before it.
INSERT INTO tasuki_flow_barriers (flow, barrier, size, expires_at)
VALUES (%(flow)s, %(barrier)s, %(size)s, %(expires_at)s)
ON CONFLICT (flow, barrier) DO UPDATE SET size = excluded.size;

-- name: flow_fill
-- First writer wins the slot: a second write of it changes nothing.
INSERT INTO tasuki_flow_slots (flow, barrier, slot, value, expires_at)
VALUES (%(flow)s, %(barrier)s, %(slot)s, %(value)s, %(expires_at)s)
ON CONFLICT (flow, barrier, slot) DO NOTHING;

-- name: flow_slot_taken
-- Run only after `flow_fill` took a slot, in its transaction, under the barrier's lock
-- (`flow_barrier`): the number of slots filled, kept with the set rather than counted
-- from it by every settle (a group of n members counted n²/2 rows that way).
UPDATE tasuki_flow_barriers SET filled = filled + 1
WHERE flow = %(flow)s AND barrier = %(barrier)s RETURNING filled;

-- name: flow_slots
SELECT value FROM tasuki_flow_slots
WHERE flow = %(flow)s AND barrier = %(barrier)s ORDER BY slot;

-- name: flow_barrier_value
UPDATE tasuki_flow_barriers SET value = %(value)s
WHERE flow = %(flow)s AND barrier = %(barrier)s;

-- name: flow_group_value
SELECT value FROM tasuki_flow_barriers
WHERE flow = %(flow)s AND barrier = %(barrier)s AND expires_at > %(now)s;

-- name: flow_slots_forget_expired
-- Maintenance (`FlowsCleaner`): at most `limit` rows past their time, per table.
DELETE FROM tasuki_flow_slots
WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM tasuki_flow_slots WHERE expires_at <= %(now)s
    LIMIT %(limit)s FOR UPDATE SKIP LOCKED
));

-- name: flow_barriers_forget_expired
DELETE FROM tasuki_flow_barriers
WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM tasuki_flow_barriers WHERE expires_at <= %(now)s
    LIMIT %(limit)s FOR UPDATE SKIP LOCKED
));

-- name: flows_forget_expired
DELETE FROM tasuki_flows
WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM tasuki_flows WHERE expires_at <= %(now)s
    LIMIT %(limit)s FOR UPDATE SKIP LOCKED
));
