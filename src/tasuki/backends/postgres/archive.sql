-- The archive of acked messages (`?archive=true`): PostgreSQL's extras, loaded with
-- queries.sql. Parameters and conventions as there.

-- name: ack_archive
-- `ack` for a backend with `?archive=true`: the same, and the deleted rows are moved to
-- the archive by the same statement (so an ack and its archiving commit together).
WITH gone AS (
    DELETE FROM tasuki_messages m
    USING unnest(%(queues)b::text[], %(ids)b::text[], %(tokens)b::text[]) AS r(queue, id, token)
    WHERE m.queue = r.queue AND m.id = r.id AND m.token = r.token AND m.state = 1
    RETURNING m.queue, m.id, m.token, m.keep_id, m.body, m.headers, m.attempt,
              m.max_attempts, m.fence, m.enqueued_at, m.limits IS NOT NULL AS limited
), kept AS (
    INSERT INTO tasuki_finished (queue, id, expires_at)
    SELECT queue, id, %(now)s + keep_id FROM gone WHERE keep_id > 0
    ON CONFLICT (queue, id) DO UPDATE SET expires_at = excluded.expires_at
), told AS (
    INSERT INTO tasuki_history (queue, id, at, event, fence, detail)
    SELECT queue, id, %(now)s, 'acked', fence, '' FROM gone WHERE keep_id > 0
), pruned AS (
    DELETE FROM tasuki_history h USING gone g
    WHERE g.keep_id > 0 AND h.queue = g.queue AND h.id = g.id AND h.seq <= (
        SELECT x.seq FROM tasuki_history x WHERE x.queue = g.queue AND x.id = g.id
        ORDER BY x.seq DESC LIMIT 1 OFFSET %(keep)s - 1
    )
), counted AS (
    INSERT INTO tasuki_counts (queue, shard, acked, dead)
    SELECT queue, %(shard)s, count(*), 0 FROM gone GROUP BY queue
    ON CONFLICT (queue, shard) DO UPDATE SET acked = tasuki_counts.acked + excluded.acked
), archived AS (
    INSERT INTO tasuki_archive
        (queue, id, body, headers, attempt, max_attempts, fence, enqueued_at, acked_at)
    SELECT queue, id, body, headers, attempt, max_attempts, fence, enqueued_at, %(now)s
    FROM gone
)
SELECT queue, id, token, keep_id, limited FROM gone;

-- name: prune_archive
-- Maintenance (`ArchivePruner`): archived rows acked before `before`, at most `limit` of
-- them per statement (a short transaction; workers pruning at once skip each other's rows).
DELETE FROM tasuki_archive
WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM tasuki_archive
    WHERE acked_at < %(before)s
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
));
