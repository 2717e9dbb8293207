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

-- name: flows_redrive_all
-- Before `redrive_all`: a flow whose first failure is one of the dead letters it sends
-- back runs again, in the same transaction, so every reader sees the resumed flow
-- (`tasuki_flows_failed` holds only the flows that have a failure).
UPDATE tasuki_flows SET failure = NULL
WHERE failure IS NOT NULL AND expires_at > %(now)s
  AND (failure::jsonb ->> 'queue') = %(queue)s
  AND EXISTS (
    SELECT 1 FROM tasuki_messages m
    WHERE m.queue = %(queue)s AND m.id = (tasuki_flows.failure::jsonb ->> 'message_id')
      AND m.state = 2);

-- name: flows_redrive_ids
UPDATE tasuki_flows SET failure = NULL
WHERE failure IS NOT NULL AND expires_at > %(now)s
  AND (failure::jsonb ->> 'queue') = %(queue)s
  AND (failure::jsonb ->> 'message_id') = ANY(%(ids)s::text[])
  AND EXISTS (
    SELECT 1 FROM tasuki_messages m
    WHERE m.queue = %(queue)s AND m.id = (tasuki_flows.failure::jsonb ->> 'message_id')
      AND m.state = 2);

-- name: flow_finish
UPDATE tasuki_flows SET result = %(value)s
WHERE id = %(id)s AND result IS NULL AND expires_at > %(now)s;

-- name: flow_fills_counted
-- Fills of one flow in one round trip (a settle batch's steps of the flow, or one fill:
-- `sql/flows.py`), where SQLite's `flow_cancelled`, `flow_barrier`, `flow_fill` and
-- `flow_slot_taken` take four per fill, each under the flow's lock: the settles of a
-- flow take turns on its row, so what that lock covers is what a group of n members
-- costs n times over (a chord of 10,000 members spent 453 us a member, mostly there).
-- The flow's row is locked first; a slot is taken unless the flow is cancelled (first
-- writer wins), and only a slot taken here counts on its barrier, whose row is made by
-- its first fill. A slot asked twice in the batch (a step and its duplicate) is tried by
-- the first only. One row per fill that took its slot, with its barrier's count after
-- the batch and its size; one row (n = -1) if the flow is cancelled, and then nothing
-- was filled. A fill with no row was taken before: that settle goes no further.
WITH locked AS (
    SELECT cancelled FROM tasuki_flows
    WHERE id = %(flow_id)s AND expires_at > %(now)s
    FOR NO KEY UPDATE
), asked AS (
    SELECT DISTINCT ON (barrier, slot) n, barrier, slot, size, value
    FROM unnest(
        %(ns)s::int[], %(barriers)s::text[], %(slots)s::int[], %(sizes)s::int[],
        %(values)s::bytea[]
    ) AS a(n, barrier, slot, size, value)
    WHERE NOT coalesce((SELECT cancelled FROM locked), false)
    ORDER BY barrier, slot, n
), taken AS (
    INSERT INTO tasuki_flow_slots (flow, barrier, slot, value, expires_at)
    SELECT %(flow)s, barrier, slot, value, %(expires_at)s FROM asked
    ON CONFLICT (flow, barrier, slot) DO NOTHING
    RETURNING barrier, slot
), counted AS (
    INSERT INTO tasuki_flow_barriers AS b (flow, barrier, size, expires_at, filled)
    SELECT %(flow)s, a.barrier, max(a.size), %(expires_at)s, count(*)
    FROM taken t JOIN asked a USING (barrier, slot)
    GROUP BY a.barrier
    ON CONFLICT (flow, barrier) DO UPDATE
    SET size = excluded.size, filled = b.filled + excluded.filled
    RETURNING barrier, filled, size
)
SELECT a.n, c.filled, c.size
FROM taken t JOIN asked a USING (barrier, slot) JOIN counted c USING (barrier)
UNION ALL
SELECT -1, NULL, NULL WHERE coalesce((SELECT cancelled FROM locked), false);

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
