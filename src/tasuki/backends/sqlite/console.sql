-- The console's queries (`sql/console.py`): pauses, listings by state, actions that
-- re-check a message's state, the worker registry and per-job stats.

-- name: console_pause
INSERT INTO tasuki_paused (queue, paused_at) VALUES (:queue, :now)
ON CONFLICT (queue) DO NOTHING;

-- name: console_resume
DELETE FROM tasuki_paused WHERE queue = :queue;

-- name: console_paused
SELECT queue FROM tasuki_paused;

-- The listings of waiting and in-flight messages: a range of the state index (whose
-- entries end with the rowid, `seq`), from the position (:at, :seq) on, within the
-- state's bound of `visible_at` (ready: up to now; delayed and in flight: after now);
-- `:job`, if not NULL, is checked on the rows found (only the in-flight listing of one
-- job asks it here: the leases of a queue are as many as its workers run).
-- name: browse_asc
SELECT seq, id, body, headers, state, visible_at, attempt, max_attempts, fence,
       enqueued_at, reason, error_type, error_message, error_traceback, died_at,
       priority, progress
FROM tasuki_messages INDEXED BY tasuki_messages_state
WHERE queue = :queue AND state = :state AND (visible_at, seq) > (:at, :seq)
  AND visible_at <= :hi
  AND (:job IS NULL OR json_extract(headers, '$."tasuki-job"') = :job)
ORDER BY visible_at, seq LIMIT :limit;

-- name: browse_desc
SELECT seq, id, body, headers, state, visible_at, attempt, max_attempts, fence,
       enqueued_at, reason, error_type, error_message, error_traceback, died_at,
       priority, progress
FROM tasuki_messages INDEXED BY tasuki_messages_state
WHERE queue = :queue AND state = :state AND (visible_at, seq) < (:at, :seq)
  AND visible_at > :lo
  AND (:job IS NULL OR json_extract(headers, '$."tasuki-job"') = :job)
ORDER BY visible_at DESC, seq DESC LIMIT :limit;

-- One job's ready or delayed messages: a range of the job index (waiting ones only).
-- name: browse_job_asc
SELECT seq, id, body, headers, state, visible_at, attempt, max_attempts, fence,
       enqueued_at, reason, error_type, error_message, error_traceback, died_at,
       priority, progress
FROM tasuki_messages INDEXED BY tasuki_messages_job
WHERE queue = :queue AND json_extract(headers, '$."tasuki-job"') = :job
  AND state = 0 AND (visible_at, seq) > (:at, :seq) AND visible_at <= :hi
ORDER BY visible_at, seq LIMIT :limit;

-- name: browse_job_desc
SELECT seq, id, body, headers, state, visible_at, attempt, max_attempts, fence,
       enqueued_at, reason, error_type, error_message, error_traceback, died_at,
       priority, progress
FROM tasuki_messages INDEXED BY tasuki_messages_job
WHERE queue = :queue AND json_extract(headers, '$."tasuki-job"') = :job
  AND state = 0 AND (visible_at, seq) < (:at, :seq) AND visible_at > :lo
ORDER BY visible_at DESC, seq DESC LIMIT :limit;

-- The dead letters, by when they died.
-- name: browse_dead_asc
SELECT seq, id, body, headers, state, visible_at, attempt, max_attempts, fence,
       enqueued_at, reason, error_type, error_message, error_traceback, died_at,
       priority, progress
FROM tasuki_messages INDEXED BY tasuki_messages_dead
WHERE queue = :queue AND state = 2 AND (died_at, seq) > (:at, :seq)
ORDER BY died_at, seq LIMIT :limit;

-- name: browse_dead_desc
SELECT seq, id, body, headers, state, visible_at, attempt, max_attempts, fence,
       enqueued_at, reason, error_type, error_message, error_traceback, died_at,
       priority, progress
FROM tasuki_messages INDEXED BY tasuki_messages_dead
WHERE queue = :queue AND state = 2 AND (died_at, seq) < (:at, :seq)
ORDER BY died_at DESC, seq DESC LIMIT :limit;

-- name: browse_dead_job_asc
SELECT seq, id, body, headers, state, visible_at, attempt, max_attempts, fence,
       enqueued_at, reason, error_type, error_message, error_traceback, died_at,
       priority, progress
FROM tasuki_messages INDEXED BY tasuki_messages_job_dead
WHERE queue = :queue AND json_extract(headers, '$."tasuki-job"') = :job AND state = 2
  AND (died_at, seq) > (:at, :seq)
ORDER BY died_at, seq LIMIT :limit;

-- name: browse_dead_job_desc
SELECT seq, id, body, headers, state, visible_at, attempt, max_attempts, fence,
       enqueued_at, reason, error_type, error_message, error_traceback, died_at,
       priority, progress
FROM tasuki_messages INDEXED BY tasuki_messages_job_dead
WHERE queue = :queue AND json_extract(headers, '$."tasuki-job"') = :job AND state = 2
  AND (died_at, seq) < (:at, :seq)
ORDER BY died_at DESC, seq DESC LIMIT :limit;

-- name: retry_delayed
-- A message still delayed (or waiting out a retry's backoff): due now, attempts kept.
UPDATE tasuki_messages SET visible_at = :now
WHERE queue = :queue AND id = :id AND state = 0 AND visible_at > :now;

-- name: cancel_in_state
-- `cancel`, only while the message is in the listed state (:state, with `visible_at`
-- after :lo and up to :hi).
DELETE FROM tasuki_messages
WHERE queue = :queue AND id = :id AND state = :state AND visible_at > :lo AND visible_at <= :hi
RETURNING state, visible_at, token, keep_id, unique_key, limits IS NOT NULL AS limited;

-- name: cancel_dead
DELETE FROM tasuki_messages WHERE queue = :queue AND id = :id AND state = 2 RETURNING id;

-- name: worker_announce
-- The worker's announce replaces its last; `stop` says whether it was asked to stop.
INSERT INTO tasuki_workers (id, seen_at, info, stop) VALUES (:id, :now, :info, 0)
ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at, info = excluded.info
RETURNING stop;

-- name: workers
SELECT id, seen_at, info FROM tasuki_workers WHERE seen_at > :since ORDER BY id;

-- name: worker_stop
UPDATE tasuki_workers SET stop = 1 WHERE id = :id;

-- name: workers_forget
-- Maintenance (`ConsoleCleaner`): at most `:limit` workers not seen for a day (86400 s).
DELETE FROM tasuki_workers WHERE id IN (
    SELECT id FROM tasuki_workers WHERE seen_at <= :now - 86400.0 LIMIT :limit
);

-- name: job_stats_add
-- Add a worker's tallies: `:queues`, `:jobs`, `:minutes`, `:names`, `:values` are
-- parallel JSON arrays, one entry per count.
INSERT INTO tasuki_job_stats (queue, minute, job, name, value)
SELECT q.value, m.value, j.value, n.value, v.value
FROM json_each(:queues) AS q
JOIN json_each(:minutes) AS m ON m.key = q.key
JOIN json_each(:jobs) AS j ON j.key = q.key
JOIN json_each(:names) AS n ON n.key = q.key
JOIN json_each(:values) AS v ON v.key = q.key
WHERE true
ON CONFLICT (queue, minute, job, name) DO UPDATE
SET value = tasuki_job_stats.value + excluded.value;

-- name: job_stats
SELECT job, name, sum(value) AS value FROM tasuki_job_stats
WHERE queue = :queue AND minute > :since GROUP BY job, name;

-- name: job_stats_forget
-- Maintenance (`ConsoleCleaner`): at most `:limit` rollups older than a day (86400 s).
DELETE FROM tasuki_job_stats WHERE (queue, minute, job, name) IN (
    SELECT queue, minute, job, name FROM tasuki_job_stats
    WHERE minute <= :now - 86400.0 LIMIT :limit
);
