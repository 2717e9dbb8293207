-- The console's queries (`sql/console.py`): pauses, listings by state, actions that
-- re-check a message's state, the worker registry and per-job stats.

-- name: console_pause
INSERT INTO tasuki_paused (queue, paused_at) VALUES (%(queue)s, %(now)s)
ON CONFLICT (queue) DO NOTHING;

-- name: console_resume
DELETE FROM tasuki_paused WHERE queue = %(queue)s;

-- name: console_paused
SELECT queue FROM tasuki_paused;

-- The listings of waiting and in-flight messages: a range of the due index (or the job
-- index), from the position (at, seq) on, within the state's bound of `visible_at`
-- (ready: up to now; delayed and in flight: after now); the other state's few entries
-- in that range (in-flight leases among the delayed) are passed over in the index;
-- `job`, if not NULL, is checked on the rows found (only the in-flight listing of one
-- job asks it here). One job's ready or delayed messages: a range of the job index.
-- name: browse_asc
SELECT seq, id, body, headers, state, visible_at, attempt, max_attempts, fence,
       enqueued_at, reason, error_type, error_message, error_traceback, died_at,
       priority, progress
FROM tasuki_messages
WHERE queue = %(queue)s AND state < 2 AND state = %(state)s AND (visible_at, seq) > (%(at)s, %(seq)s)
  AND visible_at <= %(hi)s
  AND (%(job)s::text IS NULL OR (headers::jsonb ->> 'tasuki-job') = %(job)s)
ORDER BY visible_at, seq LIMIT %(limit)s;

-- name: browse_desc
SELECT seq, id, body, headers, state, visible_at, attempt, max_attempts, fence,
       enqueued_at, reason, error_type, error_message, error_traceback, died_at,
       priority, progress
FROM tasuki_messages
WHERE queue = %(queue)s AND state < 2 AND state = %(state)s AND (visible_at, seq) < (%(at)s, %(seq)s)
  AND visible_at > %(lo)s
  AND (%(job)s::text IS NULL OR (headers::jsonb ->> 'tasuki-job') = %(job)s)
ORDER BY visible_at DESC, seq DESC LIMIT %(limit)s;

-- name: browse_job_asc
SELECT seq, id, body, headers, state, visible_at, attempt, max_attempts, fence,
       enqueued_at, reason, error_type, error_message, error_traceback, died_at,
       priority, progress
FROM tasuki_messages
WHERE queue = %(queue)s AND (headers::jsonb ->> 'tasuki-job') = %(job)s
  AND (headers::jsonb ->> 'tasuki-job') IS NOT NULL
  AND state = 0 AND (visible_at, seq) > (%(at)s, %(seq)s) AND visible_at <= %(hi)s
ORDER BY visible_at, seq LIMIT %(limit)s;

-- name: browse_job_desc
SELECT seq, id, body, headers, state, visible_at, attempt, max_attempts, fence,
       enqueued_at, reason, error_type, error_message, error_traceback, died_at,
       priority, progress
FROM tasuki_messages
WHERE queue = %(queue)s AND (headers::jsonb ->> 'tasuki-job') = %(job)s
  AND (headers::jsonb ->> 'tasuki-job') IS NOT NULL
  AND state = 0 AND (visible_at, seq) < (%(at)s, %(seq)s) AND visible_at > %(lo)s
ORDER BY visible_at DESC, seq DESC LIMIT %(limit)s;

-- The dead letters, by when they died.
-- name: browse_dead_asc
SELECT seq, id, body, headers, state, visible_at, attempt, max_attempts, fence,
       enqueued_at, reason, error_type, error_message, error_traceback, died_at,
       priority, progress
FROM tasuki_messages
WHERE queue = %(queue)s AND state = 2 AND (died_at, seq) > (%(at)s, %(seq)s)
ORDER BY died_at, seq LIMIT %(limit)s;

-- name: browse_dead_desc
SELECT seq, id, body, headers, state, visible_at, attempt, max_attempts, fence,
       enqueued_at, reason, error_type, error_message, error_traceback, died_at,
       priority, progress
FROM tasuki_messages
WHERE queue = %(queue)s AND state = 2 AND (died_at, seq) < (%(at)s, %(seq)s)
ORDER BY died_at DESC, seq DESC LIMIT %(limit)s;

-- name: browse_dead_job_asc
SELECT seq, id, body, headers, state, visible_at, attempt, max_attempts, fence,
       enqueued_at, reason, error_type, error_message, error_traceback, died_at,
       priority, progress
FROM tasuki_messages
WHERE queue = %(queue)s AND (headers::jsonb ->> 'tasuki-job') = %(job)s AND state = 2
  AND (headers::jsonb ->> 'tasuki-job') IS NOT NULL
  AND (died_at, seq) > (%(at)s, %(seq)s)
ORDER BY died_at, seq LIMIT %(limit)s;

-- name: browse_dead_job_desc
SELECT seq, id, body, headers, state, visible_at, attempt, max_attempts, fence,
       enqueued_at, reason, error_type, error_message, error_traceback, died_at,
       priority, progress
FROM tasuki_messages
WHERE queue = %(queue)s AND (headers::jsonb ->> 'tasuki-job') = %(job)s AND state = 2
  AND (headers::jsonb ->> 'tasuki-job') IS NOT NULL
  AND (died_at, seq) < (%(at)s, %(seq)s)
ORDER BY died_at DESC, seq DESC LIMIT %(limit)s;

-- name: retry_delayed
-- A message still delayed (or waiting out a retry's backoff): due now, attempts kept.
UPDATE tasuki_messages SET visible_at = %(now)s
WHERE queue = %(queue)s AND id = %(id)s AND state = 0 AND visible_at > %(now)s;

-- name: cancel_in_state
-- `cancel`, only while the message is in the listed state (`state`, with `visible_at`
-- after `lo` and up to `hi`).
DELETE FROM tasuki_messages
WHERE queue = %(queue)s AND id = %(id)s AND state = %(state)s AND visible_at > %(lo)s AND visible_at <= %(hi)s
RETURNING state, visible_at, token, keep_id, unique_key, limits IS NOT NULL AS limited;

-- name: cancel_dead
DELETE FROM tasuki_messages WHERE queue = %(queue)s AND id = %(id)s AND state = 2 RETURNING id;

-- name: worker_announce
-- The worker's announce replaces its last; `stop` says whether it was asked to stop.
INSERT INTO tasuki_workers (id, seen_at, info, stop) VALUES (%(id)s, %(now)s, %(info)s, false)
ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at, info = excluded.info
RETURNING stop;

-- name: workers
SELECT id, seen_at, info FROM tasuki_workers WHERE seen_at > %(since)s ORDER BY id;

-- name: worker_stop
UPDATE tasuki_workers SET stop = true WHERE id = %(id)s;

-- name: workers_forget
-- Maintenance (`ConsoleCleaner`): at most `%(limit)s` workers not seen for a day (86400 s).
DELETE FROM tasuki_workers WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM tasuki_workers WHERE seen_at <= %(now)s - 86400.0
    LIMIT %(limit)s FOR UPDATE SKIP LOCKED
));

-- name: job_stats_add
-- Add a worker's tallies: parallel arrays, one entry per count.
INSERT INTO tasuki_job_stats (queue, minute, job, name, value)
SELECT * FROM unnest(%(queues)s::text[], %(minutes)s::double precision[], %(jobs)s::text[],
                     %(names)s::text[], %(values)s::bigint[])
ORDER BY 1, 2, 3, 4
ON CONFLICT (queue, minute, job, name) DO UPDATE
SET value = tasuki_job_stats.value + excluded.value;

-- name: job_stats
SELECT job, name, sum(value) AS value FROM tasuki_job_stats
WHERE queue = %(queue)s AND minute > %(since)s GROUP BY job, name;

-- name: job_stats_forget
-- Maintenance (`ConsoleCleaner`): at most `%(limit)s` rollups older than a day (86400 s).
DELETE FROM tasuki_job_stats WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM tasuki_job_stats WHERE minute <= %(now)s - 86400.0
    LIMIT %(limit)s FOR UPDATE SKIP LOCKED
));
