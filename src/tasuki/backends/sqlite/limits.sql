-- Rate and concurrency limits of the SQLite backend (`tasuki/backends/sql/limits.py`):
-- admission at lease time, in the lease's transaction (SQLite's writes are serialized:
-- nothing else admits or frees a slot meanwhile), and the wake-up of a freed slot.
-- Lists come as JSON arrays (`:ids`, `:keys` ...), lists of tuples as one JSON array of
-- arrays (`:rows`: joining parallel json_each lists by position reads n² entries).
-- A list of ids is walked first (CROSS JOIN keeps it outside), each found by the
-- (queue, id) index: left to itself the planner would range over the queue's waiting
-- messages in the state index, all of them.

-- name: limit_candidates
-- The rows the `lease` held for admission, if still due (`limits`: their JSON limits).
SELECT m.seq, m.id, m.state, m.limits
FROM json_each(:ids) AS j CROSS JOIN tasuki_messages AS m
WHERE m.queue = :queue AND m.id = j.value
  AND m.state < 2 AND m.visible_at <= :now AND m.limits IS NOT NULL;

-- name: limit_due
-- The next due messages in the lease's order (its walk of the rank index), marked
-- `held` where they are waiting messages with limits: after a lease parked some, those
-- are decided at once (`leasing.lease_now`), not a lease's batch at a time. Read
-- without locks: admission locks what it decides. `attempt < max_attempts`: attempts
-- left, by the attempt rule (core/reasons.py `exhausted`).
SELECT id, limits IS NOT NULL AND attempt < max_attempts AND state = 0 AS held
FROM tasuki_messages
WHERE queue = :queue AND state < 2 AND visible_at - head_start <= :now
  AND visible_at <= :now
ORDER BY visible_at - head_start, seq
LIMIT :scan;

-- name: limit_lease
-- The admitted rows, leased as `lease` leases them (the same columns back).
UPDATE tasuki_messages
SET state = 1, attempt = attempt + 1, fence = fence + 1, token = :nonce || '.' || (fence + 1),
    visible_at = :now + coalesce(visibility_timeout, :visibility_timeout),
    progress = NULL, parked_on = NULL
WHERE seq IN (
    SELECT m.seq FROM json_each(:ids) AS j CROSS JOIN tasuki_messages AS m
    WHERE m.queue = :queue AND m.id = j.value AND m.state < 2 AND m.visible_at <= :now
)
RETURNING false AS dead, seq AS place, id, body, headers, attempt, max_attempts, enqueued_at,
          token, fence, coalesce(visibility_timeout, :visibility_timeout) AS visibility_timeout,
          unique_key, NULL AS lost_at, false AS held;

-- name: limit_park
-- Messages over a limit, waiting again (a lapsed lease among them let go): each until
-- its `:untils`, or a freed slot of its `:keys` (null: a rate's next token).
-- `:rows`: [id, until, key] each.
WITH p AS MATERIALIZED (
    SELECT x.seq, json_extract(r.value, '$[1]') AS until, json_extract(r.value, '$[2]') AS key
    FROM json_each(:rows) AS r
    CROSS JOIN tasuki_messages AS x
    WHERE x.queue = :queue AND x.id = json_extract(r.value, '$[0]') AND x.state < 2
)
UPDATE tasuki_messages AS m
SET state = 0, token = NULL, visible_at = p.until, parked_on = p.key
FROM p
WHERE m.seq = p.seq;

-- name: slot_holders
-- For each concurrency key: its slot rows, those a live lease holds (`live`), and the
-- soonest expiry among those (`next_free`): at the latest then, a slot frees.
SELECT k.value AS key, count(s.key) AS rows_, count(m.seq) AS live,
       min(m.visible_at) AS next_free
FROM json_each(:keys) AS k
LEFT JOIN tasuki_slots AS s ON s.key = k.value
LEFT JOIN tasuki_messages AS m
    ON m.queue = s.queue AND m.id = s.id AND m.token = s.token AND m.state = 1
   AND m.visible_at > :now
GROUP BY k.value;

-- name: slots_prune
-- The keys' slot rows whose lease is over (lapsed, fenced out, or gone).
DELETE FROM tasuki_slots
WHERE key IN (SELECT value FROM json_each(:keys)) AND NOT EXISTS (
    SELECT 1 FROM tasuki_messages AS m
    WHERE m.queue = tasuki_slots.queue AND m.id = tasuki_slots.id
      AND m.token = tasuki_slots.token AND m.state = 1 AND m.visible_at > :now
);

-- name: slot_take
-- Leases admitted: each holds a slot of its key (`:rows`: [key, id, token] each).
INSERT INTO tasuki_slots (key, queue, id, token)
SELECT json_extract(value, '$[0]'), :queue, json_extract(value, '$[1]'),
       json_extract(value, '$[2]')
FROM json_each(:rows)
WHERE true
ON CONFLICT (key, queue, id) DO UPDATE SET token = excluded.token;

-- name: slots_free
-- Settled leases' slots (`:rows`: [queue, id, token] each; nothing for a fenced-out
-- token): the keys freed, one row per slot.
DELETE FROM tasuki_slots
WHERE (queue, id, token) IN (
    SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]')
    FROM json_each(:rows)
)
RETURNING key;

-- name: limit_parked_keys
-- Which of the keys have messages parked for a slot (a seek of the parked index each).
SELECT k.value AS key FROM json_each(:keys) AS k
WHERE EXISTS (SELECT 1 FROM tasuki_messages AS m WHERE m.parked_on = k.value AND m.state = 0);

-- name: limit_wake
-- A freed slot of `:key` wakes the `:n` oldest messages parked for it: ready now.
UPDATE tasuki_messages SET visible_at = min(visible_at, :now), parked_on = NULL
WHERE seq IN (
    SELECT seq FROM tasuki_messages WHERE parked_on = :key AND state = 0
    ORDER BY seq LIMIT :n
)
RETURNING queue;

-- name: rate_window
-- For each rate key: its starts within the window ending now, and when the first of
-- them leaves it.
SELECT k.value AS key, count(r.key) AS started, min(r.until) AS next_token
FROM json_each(:keys) AS k
LEFT JOIN tasuki_rate_starts AS r ON r.key = k.value AND r.until > :now
GROUP BY k.value;

-- name: rate_take
-- Starts now, each in its key's window for that many seconds (`:rows`: [key, per] each).
INSERT INTO tasuki_rate_starts (key, until)
SELECT json_extract(value, '$[0]'), :now + json_extract(value, '$[1]') FROM json_each(:rows);

-- name: rate_prune
DELETE FROM tasuki_rate_starts
WHERE key IN (SELECT value FROM json_each(:keys)) AND until <= :now;

-- name: slots_forget_dead
-- Maintenance (`LimitsCleaner`): at most `:limit` slot rows whose lease is over.
DELETE FROM tasuki_slots WHERE (key, queue, id) IN (
    SELECT s.key, s.queue, s.id FROM tasuki_slots AS s
    WHERE NOT EXISTS (
        SELECT 1 FROM tasuki_messages AS m
        WHERE m.queue = s.queue AND m.id = s.id AND m.token = s.token AND m.state = 1
          AND m.visible_at > :now
    )
    LIMIT :limit
);

-- name: rate_forget_expired
-- Maintenance (`LimitsCleaner`): at most `:limit` starts out of their window, of keys no
-- admission has pruned since.
DELETE FROM tasuki_rate_starts WHERE rowid IN (
    SELECT rowid FROM tasuki_rate_starts WHERE until <= :now LIMIT :limit
);
