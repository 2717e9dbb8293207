-- Rate and concurrency limits of the PostgreSQL backend (`tasuki/backends/sql/limits.py`):
-- admission at lease time in a transaction of its own right after the `lease` statement
-- that held the rows, serialized per key by `limit_lock_keys`, and the wake-up of a
-- freed slot, under the same locks. Lists come as arrays, parallel ones unnested together;
-- a list of ids is joined to the messages by their key, (queue, id): asked with
-- `id = ANY(...)` the planner may range over the queue's due messages instead.

-- name: limit_lock_keys
-- Transaction-level advisory locks on the keys (two-int form, class 7427: apart from the
-- one-bigint locks of the migrations), taken in the order of their hashes so that two
-- transactions locking overlapping keys never wait on each other in a circle.
SELECT count(pg_advisory_xact_lock(7427, s.h)) AS locked
FROM (SELECT DISTINCT hashtext(k) AS h FROM unnest(%(keys)s::text[]) AS k ORDER BY 1) s;

-- name: limit_candidates
-- The rows the `lease` held for admission, locked again if still due and not taken by
-- another leaser meanwhile (`limits`: their JSON limits).
SELECT m.seq, m.id, m.state, m.limits
FROM unnest(%(ids)s::text[]) AS j(id)
JOIN tasuki_messages m ON m.queue = %(queue)s AND m.id = j.id
WHERE m.state < 2 AND m.visible_at <= %(now)s AND m.limits IS NOT NULL
FOR UPDATE OF m SKIP LOCKED;

-- name: limit_due
-- The next due messages in the lease's order (its walk of the rank index), marked
-- `held` where they are waiting messages with limits: after a lease parked some, those
-- are decided at once (`leasing.lease_now`), not a lease's batch at a time. Read
-- without locks: admission locks what it decides. `attempt < max_attempts`: attempts
-- left, by the attempt rule (core/reasons.py `exhausted`).
SELECT id, limits IS NOT NULL AND attempt < max_attempts AND state = 0 AS held
FROM tasuki_messages
WHERE queue = %(queue)s AND state < 2 AND visible_at - head_start <= %(now)s
  AND visible_at <= %(now)s
ORDER BY visible_at - head_start, seq
LIMIT %(scan)s;

-- name: limit_lease
-- The admitted rows, leased as `lease` leases them (the same columns back, `place` from
-- the rows as they were).
WITH admitted AS (
    SELECT m.ctid, ARRAY[m.visible_at - m.head_start, m.seq] AS place
    FROM unnest(%(ids)s::text[]) AS j(id)
    JOIN tasuki_messages m ON m.queue = %(queue)s AND m.id = j.id
    WHERE m.state < 2 AND m.visible_at <= %(now)s
)
UPDATE tasuki_messages m
SET state = 1, attempt = m.attempt + 1, fence = m.fence + 1,
    token = %(nonce)s::text || '.' || (m.fence + 1),
    visible_at = %(now)s + coalesce(m.visibility_timeout, %(visibility_timeout)s),
    progress = NULL, parked_on = NULL
FROM admitted a
WHERE m.ctid = a.ctid
RETURNING false AS dead, a.place, m.id, m.body, m.headers, m.attempt, m.max_attempts,
          m.enqueued_at, m.token, m.fence,
          coalesce(m.visibility_timeout, %(visibility_timeout)s) AS visibility_timeout,
          m.unique_key, NULL::float8 AS lost_at, false AS held;

-- name: limit_park
-- Messages over a limit, waiting again (a lapsed lease among them let go): each until
-- its `untils`, or a freed slot of its `keys` (NULL: a rate's next token).
UPDATE tasuki_messages m
SET state = 0, token = NULL, visible_at = p.until, parked_on = p.key
FROM unnest(%(ids)s::text[], %(untils)s::float8[], %(keys)s::text[]) AS p(id, until, key)
WHERE m.queue = %(queue)s AND m.id = p.id AND m.state < 2;

-- name: slot_holders
-- For each concurrency key: its slot rows, those a live lease holds (`live`), and the
-- soonest expiry among those (`next_free`): at the latest then, a slot frees.
SELECT k.key, count(s.key) AS rows_, count(m.seq) AS live, min(m.visible_at) AS next_free
FROM unnest(%(keys)s::text[]) AS k(key)
LEFT JOIN tasuki_slots s ON s.key = k.key
LEFT JOIN tasuki_messages m
    ON m.queue = s.queue AND m.id = s.id AND m.token = s.token AND m.state = 1
   AND m.visible_at > %(now)s
GROUP BY k.key;

-- name: slots_prune
-- The keys' slot rows whose lease is over (lapsed, fenced out, or gone); a row a settle
-- is deleting meanwhile is skipped, not waited for.
DELETE FROM tasuki_slots
WHERE ctid = ANY(ARRAY(
    SELECT s.ctid FROM tasuki_slots s
    WHERE s.key = ANY(%(keys)s::text[]) AND NOT EXISTS (
        SELECT 1 FROM tasuki_messages m
        WHERE m.queue = s.queue AND m.id = s.id AND m.token = s.token AND m.state = 1
          AND m.visible_at > %(now)s
    )
    FOR UPDATE OF s SKIP LOCKED
));

-- name: slot_take
-- Leases admitted: each holds a slot of its key (`keys`, `ids`, `tokens`).
INSERT INTO tasuki_slots (key, queue, id, token)
SELECT t.key, %(queue)s, t.id, t.token
FROM unnest(%(keys)s::text[], %(ids)s::text[], %(tokens)s::text[]) AS t(key, id, token)
ON CONFLICT (key, queue, id) DO UPDATE SET token = excluded.token;

-- name: slots_free
-- Settled leases' slots (`queues`, `ids`, `tokens`; nothing for a fenced-out token): the
-- keys freed, one row per slot.
DELETE FROM tasuki_slots s
USING unnest(%(queues)s::text[], %(ids)s::text[], %(tokens)s::text[]) AS r(queue, id, token)
WHERE s.queue = r.queue AND s.id = r.id AND s.token = r.token
RETURNING s.key;

-- name: limit_parked_keys
-- Which of the keys have messages parked for a slot (a seek of the parked index each).
SELECT k AS key FROM unnest(%(keys)s::text[]) AS k
WHERE EXISTS (SELECT 1 FROM tasuki_messages m WHERE m.parked_on = k AND m.state = 0);

-- name: limit_wake
-- A freed slot of `key` wakes the `n` oldest messages parked for it: ready now. One an
-- admission holds is skipped (it is being decided, under this key's lock, after us).
UPDATE tasuki_messages SET visible_at = least(visible_at, %(now)s), parked_on = NULL
WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM tasuki_messages WHERE parked_on = %(key)s AND state = 0
    ORDER BY seq LIMIT %(n)s
    FOR UPDATE SKIP LOCKED
))
RETURNING queue;

-- name: rate_window
-- For each rate key: its starts within the window ending now, and when the first of
-- them leaves it.
SELECT k.key, count(r.key) AS started, min(r.until) AS next_token
FROM unnest(%(keys)s::text[]) AS k(key)
LEFT JOIN tasuki_rate_starts r ON r.key = k.key AND r.until > %(now)s
GROUP BY k.key;

-- name: rate_take
-- Starts now, each of its key (`keys`), in its window for its `pers` seconds.
INSERT INTO tasuki_rate_starts (key, until)
SELECT t.key, %(now)s + t.per FROM unnest(%(keys)s::text[], %(pers)s::float8[]) AS t(key, per);

-- name: rate_prune
DELETE FROM tasuki_rate_starts WHERE key = ANY(%(keys)s::text[]) AND until <= %(now)s;

-- name: slots_forget_dead
-- Maintenance (`LimitsCleaner`): at most `limit` slot rows whose lease is over; a row a
-- settle or an admission is deleting meanwhile is skipped.
DELETE FROM tasuki_slots
WHERE ctid = ANY(ARRAY(
    SELECT s.ctid FROM tasuki_slots s
    WHERE NOT EXISTS (
        SELECT 1 FROM tasuki_messages m
        WHERE m.queue = s.queue AND m.id = s.id AND m.token = s.token AND m.state = 1
          AND m.visible_at > %(now)s
    )
    LIMIT %(limit)s
    FOR UPDATE OF s SKIP LOCKED
));

-- name: rate_forget_expired
-- Maintenance (`LimitsCleaner`): at most `limit` starts out of their window, of keys no
-- admission has pruned since.
DELETE FROM tasuki_rate_starts
WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM tasuki_rate_starts WHERE until <= %(now)s LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
));
