-- Results (`sql/results.py`): one row per message that keeps its result.

-- name: result_pending
INSERT INTO tasuki_results (queue, id, keep, state, value, expires_at)
VALUES (:queue, :id, :keep, 'pending', NULL, NULL)
ON CONFLICT (queue, id) DO UPDATE
SET keep = excluded.keep, state = 'pending', value = NULL, expires_at = NULL;

-- name: result_ok
-- Run only for the receipts the ack statement deleted: its token check is this one's.
UPDATE tasuki_results SET state = 'ok', value = :value, expires_at = :now + keep
WHERE queue = :queue AND id = :id AND state = 'pending';

-- name: result_failed
-- From the dead-lettered row itself (its reason and last error), whoever dead-lettered
-- it: a dead settle or a lease that found its attempts used up.
UPDATE tasuki_results
SET state = 'failed', expires_at = :now + keep, value = (
    SELECT json_object(
        'type', coalesce(m.error_type, ''), 'message', coalesce(m.error_message, ''),
        'traceback', coalesce(m.error_traceback, ''), 'reason', coalesce(m.reason, ''))
    FROM tasuki_messages m
    WHERE m.queue = tasuki_results.queue AND m.id = tasuki_results.id AND m.state = 2)
WHERE queue = :queue AND id = :id AND state = 'pending';

-- name: result
SELECT state, value, expires_at FROM tasuki_results
WHERE queue = :queue AND id = :id AND (expires_at IS NULL OR expires_at > :now);

-- name: results_redrive_all
-- Before `redrive_all`: the results of the dead letters it sends back wait again.
UPDATE tasuki_results SET state = 'pending', value = NULL, expires_at = NULL
WHERE queue = :queue AND id IN (SELECT id FROM tasuki_messages WHERE queue = :queue AND state = 2);

-- name: results_redrive_ids
UPDATE tasuki_results SET state = 'pending', value = NULL, expires_at = NULL
WHERE queue = :queue AND id IN (
    SELECT id FROM tasuki_messages
    WHERE queue = :queue AND state = 2 AND id IN (SELECT value FROM json_each(:ids)));

-- name: result_forget
DELETE FROM tasuki_results WHERE queue = :queue AND id = :id;

-- name: results_purge
DELETE FROM tasuki_results WHERE queue = :queue;

-- name: results_forget_expired
-- Maintenance (`ResultsCleaner`): at most `:limit` results past their time.
DELETE FROM tasuki_results WHERE (queue, id) IN (
    SELECT queue, id FROM tasuki_results WHERE expires_at <= :now LIMIT :limit
);
