-- Named queries of the PostgreSQL backend: the same names as SQLite's, checked at import.
-- Parameters are named (%(queue)s, %(now)s ...); `now` is the backend's clock, passed in
-- so one transaction sees one instant.

-- name: known_id
-- An id is known while its message exists in any state, or while its finished record lives.
SELECT 1 FROM tasuki_messages WHERE queue = %(queue)s AND id = %(id)s
UNION ALL
SELECT 1 FROM tasuki_finished WHERE queue = %(queue)s AND id = %(id)s AND expires_at > %(now)s
LIMIT 1;

-- name: insert_message
INSERT INTO tasuki_messages
    (queue, id, body, headers, visible_at, enqueued_at, max_attempts,
     visibility_timeout, keep_id, unique_key)
VALUES
    (%(queue)s, %(id)s, %(body)s, %(headers)s, %(now)s + %(delay)s, %(now)s, %(max_attempts)s,
     %(visibility_timeout)s, %(keep_id)s, %(unique_key)s)
ON CONFLICT (queue, id) DO NOTHING;

-- name: replace_waiting_payload
UPDATE tasuki_messages SET body = %(body)s, headers = %(headers)s
WHERE queue = %(queue)s AND id = %(id)s AND state = 0;

-- name: due_candidates
-- Ready messages and expired leases, oldest visible first.
SELECT seq, attempt >= max_attempts AS exhausted
FROM tasuki_messages
WHERE queue = %(queue)s AND state < 2 AND visible_at <= %(now)s
ORDER BY visible_at, seq
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: lease_rows
-- The token is unique per lease: a per-batch random nonce plus the message's new fence.
UPDATE tasuki_messages
SET state = 1,
    attempt = attempt + 1,
    fence = fence + 1,
    token = %(nonce)s::text || '.' || (fence + 1),
    visible_at = %(now)s + coalesce(visibility_timeout, %(visibility_timeout)s)
WHERE seq = ANY(%(seqs)s::bigint[])
RETURNING id, body, headers, attempt, max_attempts, enqueued_at, token, fence,
          coalesce(visibility_timeout, %(visibility_timeout)s);

-- name: bury_exhausted
UPDATE tasuki_messages
SET reason = CASE state
        WHEN 1 THEN 'lease expired ' || attempt || ' times'
        ELSE 'attempts exhausted (' || attempt || ' of ' || max_attempts || ')'
    END,
    state = 2, token = NULL, died_at = %(now)s,
    error_type = NULL, error_message = NULL, error_traceback = NULL
WHERE seq = ANY(%(seqs)s::bigint[])
RETURNING id, unique_key;

-- name: next_visible_at
SELECT min(visible_at) FROM tasuki_messages WHERE queue = %(queue)s AND state < 2;

-- name: ack
DELETE FROM tasuki_messages
WHERE queue = %(queue)s AND id = %(id)s AND token = %(token)s AND state = 1
RETURNING keep_id;

-- name: remember_finished
INSERT INTO tasuki_finished (queue, id, expires_at) VALUES (%(queue)s, %(id)s, %(now)s + %(keep_id)s)
ON CONFLICT (queue, id) DO UPDATE SET expires_at = excluded.expires_at;

-- name: extend
UPDATE tasuki_messages SET visible_at = %(now)s + %(visibility_timeout)s
WHERE queue = %(queue)s AND id = %(id)s AND token = %(token)s AND state = 1;

-- name: release
UPDATE tasuki_messages
SET state = 0, token = NULL, visible_at = %(now)s + %(delay)s, attempt = attempt - %(refund)s
WHERE queue = %(queue)s AND id = %(id)s AND token = %(token)s AND state = 1;

-- name: bury
UPDATE tasuki_messages
SET state = 2, token = NULL, died_at = %(now)s, reason = %(reason)s,
    error_type = %(error_type)s, error_message = %(error_message)s, error_traceback = %(error_traceback)s
WHERE queue = %(queue)s AND id = %(id)s AND token = %(token)s AND state = 1
RETURNING id, unique_key;

-- name: stats
SELECT
    (SELECT count(*) FROM tasuki_messages
      WHERE queue = %(queue)s AND state < 2 AND visible_at <= %(now)s),
    (SELECT count(*) FROM tasuki_messages
      WHERE queue = %(queue)s AND state = 1 AND visible_at > %(now)s),
    (SELECT count(*) FROM tasuki_messages
      WHERE queue = %(queue)s AND state = 0 AND visible_at > %(now)s),
    (SELECT count(*) FROM tasuki_messages WHERE queue = %(queue)s AND state = 2),
    (SELECT min(visible_at) FROM tasuki_messages
      WHERE queue = %(queue)s AND state < 2 AND visible_at <= %(now)s);

-- name: queues
SELECT DISTINCT queue FROM tasuki_messages ORDER BY queue;

-- name: dead_letters
SELECT id, body, headers, attempt, reason, error_type, error_message, error_traceback,
       died_at, enqueued_at
FROM tasuki_messages
WHERE queue = %(queue)s AND state = 2
ORDER BY died_at DESC, seq DESC
LIMIT %(limit)s OFFSET %(offset)s;

-- name: dead_letter
SELECT id, body, headers, attempt, reason, error_type, error_message, error_traceback,
       died_at, enqueued_at
FROM tasuki_messages
WHERE queue = %(queue)s AND id = %(id)s AND state = 2;

-- name: redrive_all
UPDATE tasuki_messages
SET state = 0, attempt = 0, visible_at = %(now)s, reason = NULL, died_at = NULL,
    error_type = NULL, error_message = NULL, error_traceback = NULL
WHERE queue = %(queue)s AND state = 2;

-- name: redrive_ids
UPDATE tasuki_messages
SET state = 0, attempt = 0, visible_at = %(now)s, reason = NULL, died_at = NULL,
    error_type = NULL, error_message = NULL, error_traceback = NULL
WHERE queue = %(queue)s AND state = 2 AND id = ANY(%(ids)s::text[]);

-- name: purge_dead
DELETE FROM tasuki_messages WHERE queue = %(queue)s AND state = 2;

-- name: purge_waiting_locks
-- Only locks still owned by the queue's waiting messages: a running job keeps its own.
DELETE FROM tasuki_locks
WHERE EXISTS (
    SELECT 1 FROM tasuki_messages m
    WHERE m.queue = %(queue)s AND m.state = 0
      AND m.unique_key = tasuki_locks.key AND m.id = tasuki_locks.owner
);

-- name: purge
DELETE FROM tasuki_messages WHERE queue = %(queue)s;

-- name: forget_expired
DELETE FROM tasuki_finished WHERE expires_at <= %(now)s;

-- name: lock_acquire
-- Insert, or take over a lapsed lock, or refresh one's own; a live foreign lock stays.
INSERT INTO tasuki_locks (key, owner, expires_at) VALUES (%(key)s, %(owner)s, %(now)s + %(ttl)s)
ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
WHERE tasuki_locks.expires_at <= %(now)s OR tasuki_locks.owner = excluded.owner;

-- name: lock_renew
UPDATE tasuki_locks SET expires_at = %(now)s + %(ttl)s
WHERE key = %(key)s AND owner = %(owner)s AND expires_at > %(now)s;

-- name: lock_release
DELETE FROM tasuki_locks WHERE key = %(key)s AND owner = %(owner)s AND expires_at > %(now)s;

-- name: lock_swap
UPDATE tasuki_locks SET owner = %(new_owner)s, expires_at = %(now)s + %(ttl)s
WHERE key = %(key)s AND owner = %(owner)s AND expires_at > %(now)s;

-- name: lock_holder
SELECT owner, expires_at FROM tasuki_locks WHERE key = %(key)s AND expires_at > %(now)s;

-- name: lock_drop_owned
DELETE FROM tasuki_locks WHERE key = %(key)s AND owner = %(owner)s;

-- name: locks_forget_expired
DELETE FROM tasuki_locks WHERE expires_at <= %(now)s;

-- name: record_history
-- How one lease of a message ended (`inspect`).
INSERT INTO tasuki_history (queue, id, at, event, fence, detail)
VALUES (%(queue)s, %(id)s, %(now)s, %(event)s, %(fence)s, %(detail)s);

-- name: record_lost_leases
-- Among messages about to be leased or buried, those still in flight lost their lease
-- (recorded at the time it expired).
INSERT INTO tasuki_history (queue, id, at, event, fence, detail)
SELECT queue, id, visible_at, 'lease lost', fence, ''
FROM tasuki_messages
WHERE seq = ANY(%(seqs)s::bigint[]) AND state = 1
RETURNING queue, id;

-- name: prune_history
-- Keep the last `keep` entries of a message's history.
DELETE FROM tasuki_history
WHERE queue = %(queue)s AND id = %(id)s AND seq <= (
    SELECT seq FROM tasuki_history WHERE queue = %(queue)s AND id = %(id)s
    ORDER BY seq DESC LIMIT 1 OFFSET %(keep)s
);

-- name: forget_history
-- The history of messages that are gone, unless their id is remembered as finished.
DELETE FROM tasuki_history
WHERE NOT EXISTS (
    SELECT 1 FROM tasuki_messages m
    WHERE m.queue = tasuki_history.queue AND m.id = tasuki_history.id
) AND NOT EXISTS (
    SELECT 1 FROM tasuki_finished f
    WHERE f.queue = tasuki_history.queue AND f.id = tasuki_history.id
      AND f.expires_at > %(now)s
);

-- name: inspect_message
SELECT state, visible_at, attempt, max_attempts, fence, enqueued_at, reason,
       error_type, error_message, error_traceback, died_at
FROM tasuki_messages WHERE queue = %(queue)s AND id = %(id)s;

-- name: inspect_finished
SELECT expires_at FROM tasuki_finished
WHERE queue = %(queue)s AND id = %(id)s AND expires_at > %(now)s;

-- name: inspect_history
SELECT at, event, fence, detail FROM tasuki_history
WHERE queue = %(queue)s AND id = %(id)s
ORDER BY seq DESC LIMIT %(limit)s;

-- name: count_settled
-- Totals of acked and dead messages per queue, in a few rows (shards) so that concurrent
-- settling transactions seldom wait on the same row.
INSERT INTO tasuki_counts (queue, shard, acked, dead)
VALUES (%(queue)s, %(shard)s, %(acked)s, %(dead)s)
ON CONFLICT (queue, shard) DO UPDATE
SET acked = tasuki_counts.acked + excluded.acked, dead = tasuki_counts.dead + excluded.dead;

-- name: settled_totals
SELECT coalesce(sum(acked), 0), coalesce(sum(dead), 0) FROM tasuki_counts
WHERE queue = %(queue)s;

-- name: in_flight
-- Current leases, soonest expiry first (a range of the state index).
SELECT id, attempt, max_attempts, fence, enqueued_at, visible_at FROM tasuki_messages
WHERE queue = %(queue)s AND state = 1 AND visible_at > %(now)s
ORDER BY visible_at, seq
LIMIT %(limit)s;
