-- Named queries of the SQLite backend (tasuki.backends.sql.dialect lists the names).
-- Parameters are named (:queue, :now ...); `:now` is always the backend's clock, passed
-- in so one transaction sees one instant. Rows are read by column name: every column a
-- query returns has one.

-- name: known_id
-- An id is known while its message exists in any state, or while its finished record lives.
SELECT 1 AS known FROM tasuki_messages WHERE queue = :queue AND id = :id
UNION ALL
SELECT 1 FROM tasuki_finished WHERE queue = :queue AND id = :id AND expires_at > :now
LIMIT 1;

-- name: insert_message
-- The row's `seq`, its rowid and so its place in the table, follows its rank at enqueue:
-- the millisecond of `visible_at - head_start`, times 2^21, plus its order among that
-- millisecond's messages. The rows a lease takes together then lie together in the
-- table, whatever their priorities, and the lease and the ack write a few pages, not one
-- page per row (in enqueue order, the 256 most urgent of a million messages of mixed
-- priorities lay in ten times as many pages); and a lease's rows, handed out in `seq`
-- order, come out by rank. A millisecond full, or a rank past the year 2106, leaves the
-- rowid to SQLite, which stores the row at the table's end.
INSERT INTO tasuki_messages
    (seq, queue, id, body, headers, visible_at, enqueued_at, max_attempts,
     visibility_timeout, keep_id, unique_key, priority, head_start, limits)
VALUES (
    CASE WHEN abs(:now + :delay - :head_start) < 4.3e9
    THEN (SELECT CASE WHEN last IS NULL THEN base WHEN last + 1 < base + 2097152 THEN last + 1 END
          FROM (SELECT base, (SELECT seq FROM tasuki_messages
                              WHERE seq >= base AND seq < base + 2097152
                              ORDER BY seq DESC LIMIT 1) AS last
                FROM (SELECT CAST((:now + :delay - :head_start) * 1000 AS INTEGER) * 2097152
                             AS base)))
    END,
    :queue, :id, :body, :headers, :now + :delay, :now, :max_attempts,
    :visibility_timeout, :keep_id, :unique_key, :priority, :head_start, :limits);

-- name: replace_waiting_payload
UPDATE tasuki_messages SET body = :body, headers = :headers
WHERE queue = :queue AND id = :id AND state = 0;

-- name: lease
-- The first due rows by rank (ready messages and expired leases; rank = visible_at -
-- head_start, FIFO within a rank), leased, and the exhausted ones (attempts used up)
-- dead-lettered, in one statement. The rank index is walked from its start; `rank <= :now`
-- ends the walk where no row can be due (head_start >= 0), so rows that are not due yet
-- cost a step each only while their rank is already past. Returns every row it changed:
-- `dead` marks the dead-lettered ones, `unique_key` the lock the caller still has to drop;
-- `record_lost_leases`, run just before, found the lost leases (`lost_at` is NULL here).
-- A row with limits is held, not leased (`held`, left as it was): its admission
-- (`sql/limits.py`) leases or parks it in the same transaction.
-- The token is unique per lease: a per-batch random nonce plus the message's new fence.
WITH due AS (
    -- `attempt >= max_attempts` is the attempt rule (core/reasons.py `exhausted`).
    SELECT seq, CASE WHEN attempt >= max_attempts THEN 1
                     WHEN limits IS NOT NULL THEN 2 ELSE 0 END AS act
    FROM tasuki_messages
    WHERE queue = :queue AND state < 2 AND visible_at - head_start <= :now
      AND visible_at <= :now
    ORDER BY visible_at - head_start, seq
    LIMIT :limit
)
UPDATE tasuki_messages AS m
SET state = CASE due.act WHEN 0 THEN 1 WHEN 1 THEN 2 ELSE m.state END,
    attempt = m.attempt + (due.act = 0),
    fence = m.fence + (due.act = 0),
    token = CASE due.act WHEN 0 THEN :nonce || '.' || (m.fence + 1)
                         WHEN 1 THEN NULL ELSE m.token END,
    visible_at = CASE WHEN due.act = 0
        THEN :now + coalesce(m.visibility_timeout, :visibility_timeout) ELSE m.visible_at END,
    died_at = CASE WHEN due.act = 1 THEN :now ELSE m.died_at END,
    reason = CASE
        WHEN due.act <> 1 THEN m.reason
        WHEN m.state = 1 THEN 'lease_expired'
        ELSE 'attempts_exhausted'
    END,
    error_type = CASE WHEN due.act = 1 THEN NULL ELSE m.error_type END,
    error_message = CASE WHEN due.act = 1 THEN NULL ELSE m.error_message END,
    error_traceback = CASE WHEN due.act = 1 THEN NULL ELSE m.error_traceback END,
    progress = CASE WHEN due.act = 2 THEN m.progress END
FROM due
WHERE m.seq = due.seq
RETURNING state = 2 AS dead, seq AS place, id, body, headers, attempt, max_attempts,
          enqueued_at, token, fence,
          coalesce(visibility_timeout, :visibility_timeout) AS visibility_timeout,
          unique_key, NULL AS lost_at, limits IS NOT NULL AND state < 2 AS held;

-- name: next_visible_at
-- The first entries of the state index for states 0 and 1: two seeks (one range over
-- both would read every waiting message's entry: 50 ms at a million).
SELECT min(next_at) AS next_at FROM (
    SELECT min(visible_at) AS next_at FROM tasuki_messages WHERE queue = :queue AND state = 0
    UNION ALL
    SELECT min(visible_at) FROM tasuki_messages WHERE queue = :queue AND state = 1
);

-- name: ack
-- A batch of receipts, read from `:receipts` (one JSON array of [queue, id, token]):
-- delete the messages whose lease the token still holds. Returns the deleted (queue, id,
-- token, keep_id); `remember_finished` keeps the ids whose keep_id is over 0.
-- CROSS JOIN keeps the receipts outside, each found by the (queue, id) index.
DELETE FROM tasuki_messages
WHERE seq IN (
    SELECT m.seq
    FROM json_each(:receipts) AS r
    CROSS JOIN tasuki_messages AS m
    WHERE m.queue = json_extract(r.value, '$[0]') AND m.id = json_extract(r.value, '$[1]')
      AND m.token = json_extract(r.value, '$[2]') AND m.state = 1
)
RETURNING queue, id, token, keep_id, limits IS NOT NULL AS limited;

-- name: remember_finished
INSERT INTO tasuki_finished (queue, id, expires_at) VALUES (:queue, :id, :now + :keep_id)
ON CONFLICT (queue, id) DO UPDATE SET expires_at = excluded.expires_at;

-- name: extend
-- A lapsed lease of a message under limits is not kept: the slot it held may be
-- another's now (`keep` too).
UPDATE tasuki_messages SET visible_at = :now + :visibility_timeout
WHERE queue = :queue AND id = :id AND token = :token AND state = 1
  AND (visible_at > :now OR limits IS NULL);

-- name: keep
-- `extend`, storing the job's progress (JSON, NULL: none new) with the lease that holds it.
UPDATE tasuki_messages
SET visible_at = :now + :visibility_timeout, progress = coalesce(:progress, progress)
WHERE queue = :queue AND id = :id AND token = :token AND state = 1
  AND (visible_at > :now OR limits IS NULL);

-- name: lease_cancelled
-- A lease `keep` refused: was its message cancelled while it ran?
SELECT 1 AS cancelled FROM tasuki_finished
WHERE queue = :queue AND id = :id AND cancelled = :token AND expires_at > :now;

-- name: cancel
-- A waiting or leased message, deleted: the caller remembers it as cancelled.
DELETE FROM tasuki_messages WHERE queue = :queue AND id = :id AND state < 2
RETURNING state, visible_at, token, keep_id, unique_key, limits IS NOT NULL AS limited;

-- name: remember_cancelled
-- A cancelled message's id, remembered for `:window`: enqueued again it is a duplicate,
-- `inspect` says cancelled, and `:token` (the lease it ran under, or '') is told so.
INSERT INTO tasuki_finished (queue, id, expires_at, cancelled)
VALUES (:queue, :id, :now + :window, :token)
ON CONFLICT (queue, id) DO UPDATE
SET expires_at = excluded.expires_at, cancelled = excluded.cancelled;

-- name: release
UPDATE tasuki_messages
SET state = 0, token = NULL, visible_at = :now + :delay, attempt = attempt - :refund
WHERE queue = :queue AND id = :id AND token = :token AND state = 1
RETURNING limits IS NOT NULL AS limited;

-- name: dead
UPDATE tasuki_messages
SET state = 2, token = NULL, died_at = :now, reason = :reason,
    error_type = :error_type, error_message = :error_message, error_traceback = :error_traceback
WHERE queue = :queue AND id = :id AND token = :token AND state = 1
RETURNING id, unique_key, limits IS NOT NULL AS limited;

-- name: stats
-- The waiting and dead counts are read (`count_depth` keeps them); what is counted is
-- the messages in flight and the delayed ones, two short ranges of the state index
-- whatever the depth of the queue. Ready: waiting and due, or in flight past its lease.
WITH kept AS (
    SELECT coalesce((SELECT waiting FROM tasuki_depth WHERE queue = :queue), 0) AS waiting,
           coalesce((SELECT dead FROM tasuki_depth WHERE queue = :queue), 0) AS dead
), leased AS (
    SELECT count(*) FILTER (WHERE visible_at > :now) AS live,
           count(*) FILTER (WHERE visible_at <= :now) AS lapsed
    FROM tasuki_messages WHERE queue = :queue AND state = 1
), delayed AS (
    SELECT count(*) AS n FROM tasuki_messages
    WHERE queue = :queue AND state = 0 AND visible_at > :now
)
SELECT kept.waiting - delayed.n + leased.lapsed AS ready, leased.live AS in_flight,
       delayed.n AS delayed, kept.dead AS dead,
       (SELECT min(at) FROM (
            SELECT min(visible_at) AS at FROM tasuki_messages
            WHERE queue = :queue AND state = 0 AND visible_at <= :now
            UNION ALL
            SELECT min(visible_at) FROM tasuki_messages
            WHERE queue = :queue AND state = 1 AND visible_at <= :now
        )) AS oldest_ready
FROM kept, leased, delayed;

-- name: count_depth
-- Add to a queue's counts of waiting and dead messages (see `tasuki_depth`).
INSERT INTO tasuki_depth (queue, waiting, dead) VALUES (:queue, :waiting, :dead)
ON CONFLICT (queue) DO UPDATE
SET waiting = waiting + excluded.waiting, dead = dead + excluded.dead;

-- name: reset_depth
-- A purged queue: nothing left to count.
DELETE FROM tasuki_depth WHERE queue = :queue;

-- name: queues
-- A skip scan of the (queue, id) index: one seek per queue, not a walk over every row
-- (DISTINCT read all of a million-message queue's index entries).
WITH RECURSIVE names(queue) AS (
    SELECT min(queue) FROM tasuki_messages
    UNION ALL
    SELECT (SELECT min(queue) FROM tasuki_messages WHERE queue > names.queue)
    FROM names WHERE names.queue IS NOT NULL
)
SELECT queue FROM names WHERE queue IS NOT NULL;

-- name: dead_letters
SELECT id, body, headers, attempt, reason, error_type, error_message, error_traceback,
       died_at, enqueued_at, max_attempts
FROM tasuki_messages
WHERE queue = :queue AND state = 2
ORDER BY died_at DESC, seq DESC
LIMIT :limit OFFSET :offset;

-- name: dead_letter
SELECT id, body, headers, attempt, reason, error_type, error_message, error_traceback,
       died_at, enqueued_at, max_attempts
FROM tasuki_messages
WHERE queue = :queue AND id = :id AND state = 2;

-- name: redrive_all
UPDATE tasuki_messages
SET state = 0, attempt = 0, visible_at = :now, reason = NULL, died_at = NULL,
    error_type = NULL, error_message = NULL, error_traceback = NULL
WHERE queue = :queue AND state = 2;

-- name: redrive_ids
UPDATE tasuki_messages
SET state = 0, attempt = 0, visible_at = :now, reason = NULL, died_at = NULL,
    error_type = NULL, error_message = NULL, error_traceback = NULL
WHERE queue = :queue AND state = 2 AND id IN (SELECT value FROM json_each(:ids));

-- name: purge_dead
DELETE FROM tasuki_messages WHERE queue = :queue AND state = 2;

-- name: purge_waiting_locks
-- Only locks still owned by the queue's waiting messages: a running job keeps its own.
DELETE FROM tasuki_locks
WHERE EXISTS (
    SELECT 1 FROM tasuki_messages m
    WHERE m.queue = :queue AND m.state = 0
      AND m.unique_key = tasuki_locks.key AND m.id = tasuki_locks.owner
);

-- name: purge
DELETE FROM tasuki_messages WHERE queue = :queue;

-- name: forget_expired
-- Maintenance (`ExpiredCleaner`): at most `:limit` finished ids past their window.
DELETE FROM tasuki_finished WHERE (queue, id) IN (
    SELECT queue, id FROM tasuki_finished WHERE expires_at <= :now LIMIT :limit
);

-- name: lock_acquire
-- Insert, or take over a lapsed lock, or refresh one's own; a live foreign lock stays.
INSERT INTO tasuki_locks (key, owner, expires_at) VALUES (:key, :owner, :now + :ttl)
ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
WHERE tasuki_locks.expires_at <= :now OR tasuki_locks.owner = excluded.owner;

-- name: lock_renew
UPDATE tasuki_locks SET expires_at = :now + :ttl
WHERE key = :key AND owner = :owner AND expires_at > :now;

-- name: lock_release
DELETE FROM tasuki_locks WHERE key = :key AND owner = :owner AND expires_at > :now;

-- name: lock_swap
UPDATE tasuki_locks SET owner = :new_owner, expires_at = :now + :ttl
WHERE key = :key AND owner = :owner AND expires_at > :now;

-- name: lock_holder
SELECT owner, expires_at FROM tasuki_locks WHERE key = :key AND expires_at > :now;

-- name: lock_drop_owned
DELETE FROM tasuki_locks WHERE key = :key AND owner = :owner;

-- name: locks_forget_expired
-- Maintenance (`ExpiredCleaner`): at most `:limit` locks past their expiry.
DELETE FROM tasuki_locks WHERE key IN (
    SELECT key FROM tasuki_locks WHERE expires_at <= :now LIMIT :limit
);

-- name: record_history
-- How one lease of a message ended (`inspect`).
INSERT INTO tasuki_history (queue, id, at, event, fence, detail)
VALUES (:queue, :id, :now, :event, :fence, :detail);

-- name: record_lost_leases
-- Among the rows the next `lease` takes (the same selection, in the same transaction),
-- those still in flight lost their lease: recorded at the time it expired. Returns
-- (id, lost_at) of each, for the reliability meters.
INSERT INTO tasuki_history (queue, id, at, event, fence, detail)
SELECT queue, id, visible_at, 'lease lost', fence, ''
FROM (
    SELECT queue, id, visible_at, fence, state
    FROM tasuki_messages
    WHERE queue = :queue AND state < 2 AND visible_at - head_start <= :now
      AND visible_at <= :now
    ORDER BY visible_at - head_start, seq
    LIMIT :limit
)
WHERE state = 1
RETURNING id, at AS lost_at;

-- name: prune_history
-- Keep the last `keep` entries of a message's history.
DELETE FROM tasuki_history
WHERE queue = :queue AND id = :id AND seq <= (
    SELECT seq FROM tasuki_history WHERE queue = :queue AND id = :id
    ORDER BY seq DESC LIMIT 1 OFFSET :keep
);

-- name: forget_history
-- Maintenance (`HistoryCleaner`): the history of messages that are gone, unless their id
-- is remembered as finished; at most `:limit` entries.
DELETE FROM tasuki_history WHERE seq IN (
    SELECT h.seq FROM tasuki_history h
    WHERE NOT EXISTS (
        SELECT 1 FROM tasuki_messages m WHERE m.queue = h.queue AND m.id = h.id
    ) AND NOT EXISTS (
        SELECT 1 FROM tasuki_finished f
        WHERE f.queue = h.queue AND f.id = h.id AND f.expires_at > :now
    )
    LIMIT :limit
);

-- name: inspect_message
SELECT state, visible_at, attempt, max_attempts, fence, enqueued_at, reason,
       error_type, error_message, error_traceback, died_at, priority, progress
FROM tasuki_messages WHERE queue = :queue AND id = :id;

-- name: inspect_finished
-- `cancelled` is not NULL for a cancelled message.
SELECT expires_at, cancelled FROM tasuki_finished
WHERE queue = :queue AND id = :id AND expires_at > :now;

-- name: inspect_history
SELECT at, event, fence, detail FROM tasuki_history
WHERE queue = :queue AND id = :id
ORDER BY seq DESC LIMIT :limit;

-- name: count_settled
-- Totals of acked and dead messages per queue, in a few rows (shards) so that concurrent
-- settling transactions seldom wait on the same row.
INSERT INTO tasuki_counts (queue, shard, acked, dead)
VALUES (:queue, :shard, :acked, :dead)
ON CONFLICT (queue, shard) DO UPDATE
SET acked = tasuki_counts.acked + excluded.acked, dead = tasuki_counts.dead + excluded.dead;

-- name: settled_totals
SELECT coalesce(sum(acked), 0) AS acked, coalesce(sum(dead), 0) AS dead FROM tasuki_counts
WHERE queue = :queue;

-- name: count_meters
-- Add to a queue's reliability meters: `:names` and `:values` are parallel JSON arrays.
INSERT INTO tasuki_meters (queue, name, shard, value)
SELECT :queue, n.value, :shard, v.value
FROM json_each(:names) AS n JOIN json_each(:values) AS v ON v.key = n.key
WHERE true
ON CONFLICT (queue, name, shard) DO UPDATE SET value = tasuki_meters.value + excluded.value;

-- name: meters
SELECT name, sum(value) AS value FROM tasuki_meters WHERE queue = :queue GROUP BY name;

-- name: in_flight
-- Current leases, soonest expiry first (a range of the state index).
SELECT id, attempt, max_attempts, fence, enqueued_at, visible_at, priority, progress
FROM tasuki_messages
WHERE queue = :queue AND state = 1 AND visible_at > :now
ORDER BY visible_at, seq
LIMIT :limit;
