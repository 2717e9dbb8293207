-- Named queries of the PostgreSQL backend: the same names as SQLite's, checked at import,
-- but for the steps its `lease` and `ack` take themselves in data-modifying CTEs, and
-- for its extras (tasuki.backends.sql.dialect lists them; the archive's are in
-- archive.sql). Parameters are named
-- (%(queue)s, %(now)s ...); `now` is the backend's clock, passed in so one transaction
-- sees one instant. Rows are read by column name: every column a query returns has one.

-- name: known_id
-- An id is known while its message exists in any state, or while its finished record lives.
SELECT 1 AS known FROM tasuki_messages WHERE queue = %(queue)s AND id = %(id)s
UNION ALL
SELECT 1 FROM tasuki_finished WHERE queue = %(queue)s AND id = %(id)s AND expires_at > %(now)s
LIMIT 1;

-- name: insert_message
INSERT INTO tasuki_messages
    (queue, id, body, headers, visible_at, enqueued_at, max_attempts,
     visibility_timeout, keep_id, unique_key, priority, head_start, limits)
VALUES
    (%(queue)s, %(id)s, %(body)s, %(headers)s, %(now)s + %(delay)s, %(now)s, %(max_attempts)s,
     %(visibility_timeout)s, %(keep_id)s, %(unique_key)s, %(priority)s, %(head_start)s, %(limits)s)
ON CONFLICT (queue, id) DO NOTHING;

-- name: insert_batch
-- Plain messages (no unique claim, no id twice) in one statement, from parallel arrays
-- (sent in binary: nothing to escape): those whose id is neither stored nor remembered
-- as finished are inserted, and their queues' listeners notified (on commit) by the same
-- statement, so that an enqueue on its own is one round trip in autocommit.
-- ids and bodies hold one element per message; each of the other arrays holds
-- either that many or one element for all (a batch of one job's calls shares them, and
-- the client then encodes one value instead of a thousand).
-- Returns (queue, id) of each inserted; the others were duplicates.
WITH b AS (
    SELECT p.queues[least(v.n, cardinality(p.queues))] AS queue, v.id, v.body,
           p.headers[least(v.n, cardinality(p.headers))] AS headers,
           p.delays[least(v.n, cardinality(p.delays))] AS delay,
           p.max_attempts[least(v.n, cardinality(p.max_attempts))] AS max_attempts,
           p.vts[least(v.n, cardinality(p.vts))] AS visibility_timeout,
           p.keep_ids[least(v.n, cardinality(p.keep_ids))] AS keep_id,
           p.priorities[least(v.n, cardinality(p.priorities))] AS priority,
           p.head_starts[least(v.n, cardinality(p.head_starts))] AS head_start,
           p.limits[least(v.n, cardinality(p.limits))] AS limits
    FROM unnest(%(ids)b::text[], %(bodies)b::bytea[]) WITH ORDINALITY AS v(id, body, n),
         (SELECT %(queues)b::text[] AS queues, %(headers)b::text[] AS headers,
                 %(delays)b::float8[] AS delays,
                 %(max_attempts)b::integer[] AS max_attempts,
                 %(visibility_timeouts)b::float8[] AS vts, %(keep_ids)b::float8[] AS keep_ids,
                 %(priorities)b::smallint[] AS priorities,
                 %(head_starts)b::float8[] AS head_starts,
                 %(limits)b::text[] AS limits) p
), inserted AS (
    INSERT INTO tasuki_messages
        (queue, id, body, headers, visible_at, enqueued_at, max_attempts, visibility_timeout,
         keep_id, priority, head_start, limits)
    SELECT b.queue, b.id, b.body, b.headers, %(now)s + b.delay, %(now)s, b.max_attempts,
           b.visibility_timeout, b.keep_id, b.priority, b.head_start, b.limits
    FROM b
    WHERE NOT EXISTS (
        SELECT 1 FROM tasuki_finished f
        WHERE f.queue = b.queue AND f.id = b.id AND f.expires_at > %(now)s
    )
    ON CONFLICT (queue, id) DO NOTHING
    RETURNING queue, id
), woken AS (
    SELECT count(pg_notify(%(channel)s, q.queue)) FROM (SELECT DISTINCT queue FROM inserted) q
)
SELECT queue, id FROM inserted, woken;


-- name: insert_batch_new
-- `insert_batch` without its ON CONFLICT arbiter, for a batch whose ids are very likely
-- new (none given by the caller): the insert is not speculative, which spares a WAL
-- record per row and a quarter of the statement's time. Should an id be stored already,
-- it fails as a whole on the primary key, changing nothing, and `insert_batch` runs.
-- Keep the two statements the same but for that line.
WITH b AS (
    SELECT p.queues[least(v.n, cardinality(p.queues))] AS queue, v.id, v.body,
           p.headers[least(v.n, cardinality(p.headers))] AS headers,
           p.delays[least(v.n, cardinality(p.delays))] AS delay,
           p.max_attempts[least(v.n, cardinality(p.max_attempts))] AS max_attempts,
           p.vts[least(v.n, cardinality(p.vts))] AS visibility_timeout,
           p.keep_ids[least(v.n, cardinality(p.keep_ids))] AS keep_id,
           p.priorities[least(v.n, cardinality(p.priorities))] AS priority,
           p.head_starts[least(v.n, cardinality(p.head_starts))] AS head_start,
           p.limits[least(v.n, cardinality(p.limits))] AS limits
    FROM unnest(%(ids)b::text[], %(bodies)b::bytea[]) WITH ORDINALITY AS v(id, body, n),
         (SELECT %(queues)b::text[] AS queues, %(headers)b::text[] AS headers,
                 %(delays)b::float8[] AS delays,
                 %(max_attempts)b::integer[] AS max_attempts,
                 %(visibility_timeouts)b::float8[] AS vts, %(keep_ids)b::float8[] AS keep_ids,
                 %(priorities)b::smallint[] AS priorities,
                 %(head_starts)b::float8[] AS head_starts,
                 %(limits)b::text[] AS limits) p
), inserted AS (
    INSERT INTO tasuki_messages
        (queue, id, body, headers, visible_at, enqueued_at, max_attempts, visibility_timeout,
         keep_id, priority, head_start, limits)
    SELECT b.queue, b.id, b.body, b.headers, %(now)s + b.delay, %(now)s, b.max_attempts,
           b.visibility_timeout, b.keep_id, b.priority, b.head_start, b.limits
    FROM b
    WHERE NOT EXISTS (
        SELECT 1 FROM tasuki_finished f
        WHERE f.queue = b.queue AND f.id = b.id AND f.expires_at > %(now)s
    )
    RETURNING queue, id
), woken AS (
    SELECT count(pg_notify(%(channel)s, q.queue)) FROM (SELECT DISTINCT queue FROM inserted) q
)
SELECT queue, id FROM inserted, woken;

-- name: replace_waiting_payload
UPDATE tasuki_messages SET body = %(body)s, headers = %(headers)s
WHERE queue = %(queue)s AND id = %(id)s AND state = 0;

-- name: lease
-- One statement, one round trip: lock the first due rows by rank (ready messages and
-- expired leases; rank = visible_at - head_start, FIFO within a rank, walking the
-- partial index `tasuki_messages_rank` in its order; `rank <= now` ends the walk where no
-- row can be due, as head_start >= 0) without waiting on rows another leaser holds, lease them, and dead-letter the exhausted ones (attempts used up) with
-- their uniqueness locks dropped. Returns every row it changed: `dead` marks the dead-lettered
-- ones (counted by the caller, a statement after it when there are any: counting them
-- here cost every lease a fifth more server time), `unique_key` is the lock still to
-- drop (none: the statement dropped them), `lost_at` the expiry of a lease found lost
-- (written to the history here, and counted by the reliability meters).
-- A row with limits is held, not leased (`held`: only its seq, id and lost_at are
-- returned): its admission (`sql/limits.py`) locks it again, in a transaction, and
-- leases or parks it. Rows without limits pay one column read for it.
-- The token is unique per lease: a per-batch random nonce plus the message's new fence.
-- `place` is where a row comes in the lease's order, [rank, seq]: the caller hands the
-- messages out in it.
WITH due AS (
    -- The locked rows as they are now: in flight here means the lease lapsed.
    -- `attempt >= max_attempts` is the attempt rule (core/reasons.py `exhausted`).
    SELECT ctid, attempt >= max_attempts AS dead, state, id, visible_at, fence, seq,
           ARRAY[visible_at - head_start, seq] AS place,
           limits IS NOT NULL AND attempt < max_attempts AS held
    FROM tasuki_messages
    WHERE queue = %(queue)s AND state < 2 AND visible_at - head_start <= %(now)s
      AND visible_at <= %(now)s
    ORDER BY visible_at - head_start, seq
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), lost AS (
    INSERT INTO tasuki_history (queue, id, at, event, fence, detail)
    SELECT %(queue)s, id, visible_at, 'lease lost', fence, ''
    FROM due
    WHERE state = 1
    RETURNING id, at
), changed AS (
    UPDATE tasuki_messages m
    SET state = CASE WHEN due.dead THEN 2 ELSE 1 END,
        attempt = m.attempt + CASE WHEN due.dead THEN 0 ELSE 1 END,
        fence = m.fence + CASE WHEN due.dead THEN 0 ELSE 1 END,
        token = CASE WHEN due.dead THEN NULL ELSE %(nonce)s::text || '.' || (m.fence + 1) END,
        visible_at = CASE WHEN due.dead THEN m.visible_at
            ELSE %(now)s + coalesce(m.visibility_timeout, %(visibility_timeout)s) END,
        died_at = CASE WHEN due.dead THEN %(now)s ELSE m.died_at END,
        reason = CASE
            WHEN NOT due.dead THEN m.reason
            WHEN m.state = 1 THEN 'lease_expired'
            ELSE 'attempts_exhausted'
        END,
        error_type = CASE WHEN due.dead THEN NULL ELSE m.error_type END,
        error_message = CASE WHEN due.dead THEN NULL ELSE m.error_message END,
        error_traceback = CASE WHEN due.dead THEN NULL ELSE m.error_traceback END,
        progress = NULL
    FROM due
    WHERE m.ctid = due.ctid AND NOT due.held
    RETURNING due.dead, due.place, m.id, m.body, m.headers, m.attempt, m.max_attempts,
              m.enqueued_at, m.token, m.fence,
              coalesce(m.visibility_timeout, %(visibility_timeout)s) AS vt, m.unique_key
), unlocked AS (
    DELETE FROM tasuki_locks l USING changed c
    WHERE c.dead AND l.key = c.unique_key AND l.owner = c.id
)
SELECT c.dead, c.place, c.id, c.body, c.headers, c.attempt, c.max_attempts, c.enqueued_at,
       c.token, c.fence, c.vt AS visibility_timeout, NULL::text AS unique_key,
       lost.at AS lost_at, false AS held
FROM changed c LEFT JOIN lost ON lost.id = c.id
UNION ALL
SELECT false, h.place, h.id, NULL, NULL, NULL, NULL, NULL, NULL, h.fence, NULL, NULL,
       lost.at, true
FROM due h LEFT JOIN lost ON lost.id = h.id
WHERE h.held;

-- name: next_visible_at
SELECT min(visible_at) AS next_at FROM tasuki_messages WHERE queue = %(queue)s AND state < 2;

-- name: ack
-- A batch of receipts in one statement (three parallel arrays): delete the messages whose
-- lease the token still holds; for those with an id window, remember the id and write
-- "acked" into their history (which outlives the message for the window), keeping the
-- last `keep` entries; add them all to the queues' acked totals (`count_settled`'s
-- shard). Returns the deleted (queue, id, token, keep_id): every step is taken here.
WITH gone AS (
    DELETE FROM tasuki_messages m
    USING unnest(%(queues)b::text[], %(ids)b::text[], %(tokens)b::text[]) AS r(queue, id, token)
    WHERE m.queue = r.queue AND m.id = r.id AND m.token = r.token AND m.state = 1
    RETURNING m.queue, m.id, m.token, m.keep_id, m.fence, m.limits IS NOT NULL AS limited
), kept AS (
    INSERT INTO tasuki_finished (queue, id, expires_at)
    SELECT queue, id, %(now)s + keep_id FROM gone WHERE keep_id > 0
    ON CONFLICT (queue, id) DO UPDATE SET expires_at = excluded.expires_at
), told AS (
    INSERT INTO tasuki_history (queue, id, at, event, fence, detail)
    SELECT queue, id, %(now)s, 'acked', fence, '' FROM gone WHERE keep_id > 0
), pruned AS (
    -- The statement's own entry is not seen here: keep one fewer of the older ones.
    DELETE FROM tasuki_history h USING gone g
    WHERE g.keep_id > 0 AND h.queue = g.queue AND h.id = g.id AND h.seq <= (
        SELECT x.seq FROM tasuki_history x WHERE x.queue = g.queue AND x.id = g.id
        ORDER BY x.seq DESC LIMIT 1 OFFSET %(keep)s - 1
    )
), counted AS (
    INSERT INTO tasuki_counts (queue, shard, acked, dead)
    SELECT queue, %(shard)s, count(*), 0 FROM gone GROUP BY queue
    ON CONFLICT (queue, shard) DO UPDATE SET acked = tasuki_counts.acked + excluded.acked
)
SELECT queue, id, token, keep_id, limited FROM gone;

-- name: extend
-- A lapsed lease of a message under limits is not kept: the slot it held may be
-- another's now (`keep` too).
UPDATE tasuki_messages SET visible_at = %(now)s + %(visibility_timeout)s
WHERE queue = %(queue)s AND id = %(id)s AND token = %(token)s AND state = 1
  AND (visible_at > %(now)s OR limits IS NULL);

-- name: keep
-- `extend`, storing the job's progress (JSON, NULL: none new) with the lease that holds it.
UPDATE tasuki_messages
SET visible_at = %(now)s + %(visibility_timeout)s,
    progress = coalesce(%(progress)s::text, progress)
WHERE queue = %(queue)s AND id = %(id)s AND token = %(token)s AND state = 1
  AND (visible_at > %(now)s OR limits IS NULL);

-- name: lease_cancelled
-- A lease `keep` refused: was its message cancelled while it ran?
SELECT 1 AS cancelled FROM tasuki_finished
WHERE queue = %(queue)s AND id = %(id)s AND cancelled = %(token)s AND expires_at > %(now)s;

-- name: cancel
-- A waiting or leased message, deleted: the caller remembers it as cancelled.
DELETE FROM tasuki_messages WHERE queue = %(queue)s AND id = %(id)s AND state < 2
RETURNING state, visible_at, token, keep_id, unique_key, limits IS NOT NULL AS limited;

-- name: remember_cancelled
-- A cancelled message's id, remembered for `window`: enqueued again it is a duplicate,
-- `inspect` says cancelled, and `token` (the lease it ran under, or '') is told so.
INSERT INTO tasuki_finished (queue, id, expires_at, cancelled)
VALUES (%(queue)s, %(id)s, %(now)s + %(window)s, %(token)s)
ON CONFLICT (queue, id) DO UPDATE
SET expires_at = excluded.expires_at, cancelled = excluded.cancelled;

-- name: release
UPDATE tasuki_messages
SET state = 0, token = NULL, visible_at = %(now)s + %(delay)s, attempt = attempt - %(refund)s
WHERE queue = %(queue)s AND id = %(id)s AND token = %(token)s AND state = 1
RETURNING limits IS NOT NULL AS limited;

-- name: dead
UPDATE tasuki_messages
SET state = 2, token = NULL, died_at = %(now)s, reason = %(reason)s,
    error_type = %(error_type)s, error_message = %(error_message)s, error_traceback = %(error_traceback)s
WHERE queue = %(queue)s AND id = %(id)s AND token = %(token)s AND state = 1
RETURNING id, unique_key, limits IS NOT NULL AS limited;

-- name: stats
SELECT
    (SELECT count(*) FROM tasuki_messages
      WHERE queue = %(queue)s AND state < 2 AND visible_at <= %(now)s) AS ready,
    (SELECT count(*) FROM tasuki_messages
      WHERE queue = %(queue)s AND state = 1 AND visible_at > %(now)s) AS in_flight,
    (SELECT count(*) FROM tasuki_messages
      WHERE queue = %(queue)s AND state = 0 AND visible_at > %(now)s) AS delayed,
    (SELECT count(*) FROM tasuki_messages WHERE queue = %(queue)s AND state = 2) AS dead,
    (SELECT min(visible_at) FROM tasuki_messages
      WHERE queue = %(queue)s AND state < 2 AND visible_at <= %(now)s) AS oldest_ready;

-- name: queues
SELECT DISTINCT queue FROM tasuki_messages ORDER BY queue;

-- name: dead_letters
SELECT id, body, headers, attempt, reason, error_type, error_message, error_traceback,
       died_at, enqueued_at, max_attempts
FROM tasuki_messages
WHERE queue = %(queue)s AND state = 2
ORDER BY died_at DESC, seq DESC
LIMIT %(limit)s OFFSET %(offset)s;

-- name: dead_letter
SELECT id, body, headers, attempt, reason, error_type, error_message, error_traceback,
       died_at, enqueued_at, max_attempts
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
-- Maintenance (`ExpiredCleaner`): at most `limit` finished ids past their window.
DELETE FROM tasuki_finished
WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM tasuki_finished WHERE expires_at <= %(now)s
    LIMIT %(limit)s FOR UPDATE SKIP LOCKED
));

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
-- Maintenance (`ExpiredCleaner`): at most `limit` locks past their expiry.
DELETE FROM tasuki_locks
WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM tasuki_locks WHERE expires_at <= %(now)s
    LIMIT %(limit)s FOR UPDATE SKIP LOCKED
));

-- name: record_history
-- How one lease of a message ended (`inspect`).
INSERT INTO tasuki_history (queue, id, at, event, fence, detail)
VALUES (%(queue)s, %(id)s, %(now)s, %(event)s, %(fence)s, %(detail)s);

-- name: prune_history
-- Keep the last `keep` entries of a message's history.
DELETE FROM tasuki_history
WHERE queue = %(queue)s AND id = %(id)s AND seq <= (
    SELECT seq FROM tasuki_history WHERE queue = %(queue)s AND id = %(id)s
    ORDER BY seq DESC LIMIT 1 OFFSET %(keep)s
);

-- name: forget_history
-- Maintenance (`HistoryCleaner`): the history of messages that are gone, unless their id
-- is remembered as finished; at most `limit` entries.
DELETE FROM tasuki_history
WHERE ctid = ANY(ARRAY(
    SELECT h.ctid FROM tasuki_history h
    WHERE NOT EXISTS (
        SELECT 1 FROM tasuki_messages m WHERE m.queue = h.queue AND m.id = h.id
    ) AND NOT EXISTS (
        SELECT 1 FROM tasuki_finished f
        WHERE f.queue = h.queue AND f.id = h.id AND f.expires_at > %(now)s
    )
    LIMIT %(limit)s FOR UPDATE SKIP LOCKED
));

-- name: inspect_message
SELECT state, visible_at, attempt, max_attempts, fence, enqueued_at, reason,
       error_type, error_message, error_traceback, died_at, priority, progress
FROM tasuki_messages WHERE queue = %(queue)s AND id = %(id)s;

-- name: inspect_finished
-- `cancelled` is not NULL for a cancelled message.
SELECT expires_at, cancelled FROM tasuki_finished
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
SELECT coalesce(sum(acked), 0) AS acked, coalesce(sum(dead), 0) AS dead FROM tasuki_counts
WHERE queue = %(queue)s;

-- name: count_meters
-- Add to a queue's reliability meters: `names` and `values` are parallel arrays.
INSERT INTO tasuki_meters (queue, name, shard, value)
SELECT %(queue)s, n, %(shard)s, v
FROM unnest(%(names)s::text[], %(values)s::bigint[]) AS m(n, v)
ON CONFLICT (queue, name, shard) DO UPDATE SET value = tasuki_meters.value + excluded.value;

-- name: meters
SELECT name, sum(value) AS value FROM tasuki_meters WHERE queue = %(queue)s GROUP BY name;

-- name: in_flight
-- Current leases, soonest expiry first (a range of the state index).
SELECT id, attempt, max_attempts, fence, enqueued_at, visible_at, priority, progress
FROM tasuki_messages
WHERE queue = %(queue)s AND state = 1 AND visible_at > %(now)s
ORDER BY visible_at, seq
LIMIT %(limit)s;
