-- Results (`sql/results.py`): one row per message that keeps its result.

-- name: result_pending
INSERT INTO tasuki_results (queue, id, keep, state, value, expires_at)
VALUES (%(queue)s, %(id)s, %(keep)s, 'pending', NULL, NULL)
ON CONFLICT (queue, id) DO UPDATE
SET keep = excluded.keep, state = 'pending', value = NULL, expires_at = NULL;

-- name: result_pending_batch
-- `result_pending` for a batch of messages, each (queue, id) once.
INSERT INTO tasuki_results (queue, id, keep, state, value, expires_at)
SELECT r.queue, r.id, r.keep, 'pending', NULL, NULL
FROM unnest(%(queues)s::text[], %(ids)s::text[], %(keeps)s::float8[]) AS r(queue, id, keep)
ON CONFLICT (queue, id) DO UPDATE
SET keep = excluded.keep, state = 'pending', value = NULL, expires_at = NULL;

-- name: result_ok
-- Run only for the receipts the ack statement deleted: its token check is this one's.
UPDATE tasuki_results SET state = 'ok', value = %(value)s, expires_at = %(now)s + keep
WHERE queue = %(queue)s AND id = %(id)s AND state = 'pending';

-- name: result_ok_batch
-- `result_ok` for a batch of acked messages.
UPDATE tasuki_results r SET state = 'ok', value = v.value, expires_at = %(now)s + r.keep
FROM unnest(%(queues)s::text[], %(ids)s::text[], %(values)s::bytea[]) AS v(queue, id, value)
WHERE r.queue = v.queue AND r.id = v.id AND r.state = 'pending';

-- name: result_failed
-- From the dead-lettered row itself (its reason and last error), whoever dead-lettered
-- it: a dead settle or a lease that found its attempts used up.
UPDATE tasuki_results r
SET state = 'failed', expires_at = %(now)s + r.keep, value = (
    SELECT convert_to(json_build_object(
        'type', coalesce(m.error_type, ''), 'message', coalesce(m.error_message, ''),
        'traceback', coalesce(m.error_traceback, ''), 'reason', coalesce(m.reason, ''))::text,
        'UTF8')
    FROM tasuki_messages m WHERE m.queue = r.queue AND m.id = r.id AND m.state = 2)
WHERE r.queue = %(queue)s AND r.id = %(id)s AND r.state = 'pending';

-- name: result
SELECT state, value, expires_at FROM tasuki_results
WHERE queue = %(queue)s AND id = %(id)s AND (expires_at IS NULL OR expires_at > %(now)s);

-- name: results_redrive_all
-- Before `redrive_all`: the results of the dead letters it sends back wait again.
UPDATE tasuki_results SET state = 'pending', value = NULL, expires_at = NULL
WHERE queue = %(queue)s AND id IN (
    SELECT id FROM tasuki_messages WHERE queue = %(queue)s AND state = 2);

-- name: results_redrive_ids
UPDATE tasuki_results SET state = 'pending', value = NULL, expires_at = NULL
WHERE queue = %(queue)s AND id IN (
    SELECT id FROM tasuki_messages
    WHERE queue = %(queue)s AND state = 2 AND id = ANY(%(ids)s::text[]));

-- name: result_forget
DELETE FROM tasuki_results WHERE queue = %(queue)s AND id = %(id)s;

-- name: results_purge
DELETE FROM tasuki_results WHERE queue = %(queue)s;

-- name: results_forget_expired
-- Maintenance (`ResultsCleaner`): at most `limit` results past their time.
DELETE FROM tasuki_results
WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM tasuki_results WHERE expires_at <= %(now)s
    LIMIT %(limit)s FOR UPDATE SKIP LOCKED
));
