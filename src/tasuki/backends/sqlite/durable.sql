-- Durable steps (`sql/durable.py`): step records, signals and waits. SQLite's writes are
-- serialized (one IMMEDIATE transaction at a time), so a lease checked in a write stays
-- the caller's until its commit.

-- name: steps_read
-- Only the records of the message as it is now (not of an earlier one of that id).
SELECT s.name, s.occurrence, s.result, s.started_at, s.duration FROM tasuki_steps s
JOIN tasuki_messages m ON m.queue = s.queue AND m.id = s.id AND m.enqueued_at = s.enqueued_at
WHERE s.queue = :queue AND s.id = :id
ORDER BY s.started_at, s.name, s.occurrence;

-- name: step_record
-- Written only where the token is the message's current lease: a zombie's is refused.
-- A record an earlier message of that id left (not dropped yet) gives way.
INSERT INTO tasuki_steps (queue, id, name, occurrence, result, started_at, duration, enqueued_at)
SELECT :queue, :id, :name, :occurrence, :result, :started_at, :duration, enqueued_at
FROM tasuki_messages WHERE queue = :queue AND id = :id AND token = :token AND state = 1
ON CONFLICT (queue, id, name, occurrence) DO UPDATE
SET result = excluded.result, started_at = excluded.started_at,
    duration = excluded.duration, enqueued_at = excluded.enqueued_at
WHERE tasuki_steps.enqueued_at <> excluded.enqueued_at;

-- name: step_hold
SELECT id FROM tasuki_messages
WHERE queue = :queue AND id = :id AND token = :token AND state = 1;

-- name: signal_target
SELECT state FROM tasuki_messages WHERE queue = :queue AND id = :id;

-- name: signal_put
INSERT INTO tasuki_signals (queue, id, name, payload, sent_at, enqueued_at)
SELECT :queue, :id, :name, :payload, :now, enqueued_at
FROM tasuki_messages WHERE queue = :queue AND id = :id;

-- name: signal_wake
-- A message waiting for this signal is ready at once (the wait its last settle stored:
-- see `wait_read`).
UPDATE tasuki_messages SET visible_at = :now
WHERE queue = :queue AND id = :id AND state = 0 AND visible_at > :now
  AND EXISTS (SELECT 1 FROM tasuki_waits w
              WHERE w.queue = :queue AND w.id = :id AND w.signal = :name AND w.signal <> ''
                AND w.until >= tasuki_messages.visible_at - 0.001)
RETURNING id;

-- name: wait_end
DELETE FROM tasuki_waits WHERE queue = :queue AND id = :id;

-- name: signal_first
SELECT s.seq, s.payload FROM tasuki_signals s
JOIN tasuki_messages m ON m.queue = s.queue AND m.id = s.id AND m.enqueued_at = s.enqueued_at
WHERE s.queue = :queue AND s.id = :id AND s.name = :name
ORDER BY s.seq LIMIT 1;

-- name: signal_consume
DELETE FROM tasuki_signals WHERE seq = :seq;

-- name: wait_put
INSERT INTO tasuki_waits (queue, id, signal, until) VALUES (:queue, :id, :signal, :until)
ON CONFLICT (queue, id) DO UPDATE SET signal = excluded.signal, until = excluded.until;

-- name: wait_signalled
-- The signal it now waits for came before the wait was settled: ready at once.
UPDATE tasuki_messages SET visible_at = :now
WHERE queue = :queue AND id = :id AND state = 0
  AND EXISTS (SELECT 1 FROM tasuki_signals s
              WHERE s.queue = :queue AND s.id = :id AND s.name = :signal
                AND s.enqueued_at = tasuki_messages.enqueued_at)
RETURNING id;

-- name: wait_read
-- The wait the message's last settle stored, while it lasts: a row left by a wait that
-- ended (timed out, then retried) no longer matches the message's time.
SELECT w.signal, w.until FROM tasuki_waits w
JOIN tasuki_messages m ON m.queue = w.queue AND m.id = w.id
WHERE w.queue = :queue AND w.id = :id AND m.state = 0 AND m.visible_at > :now
  AND w.until >= m.visible_at - 0.001;

-- name: steps_forget_orphans
-- The records of messages gone (acked and their result's time over, purged, cancelled).
DELETE FROM tasuki_steps WHERE rowid IN (
    SELECT s.rowid FROM tasuki_steps s
    WHERE NOT EXISTS (SELECT 1 FROM tasuki_messages m
                      WHERE m.queue = s.queue AND m.id = s.id AND m.enqueued_at = s.enqueued_at)
      AND NOT EXISTS (SELECT 1 FROM tasuki_results r WHERE r.queue = s.queue AND r.id = s.id)
    LIMIT :limit
);

-- name: signals_forget_orphans
DELETE FROM tasuki_signals WHERE seq IN (
    SELECT s.seq FROM tasuki_signals s
    WHERE NOT EXISTS (SELECT 1 FROM tasuki_messages m
                      WHERE m.queue = s.queue AND m.id = s.id AND m.enqueued_at = s.enqueued_at)
    LIMIT :limit
);

-- name: waits_forget_orphans
DELETE FROM tasuki_waits WHERE (queue, id) IN (
    SELECT w.queue, w.id FROM tasuki_waits w
    WHERE NOT EXISTS (SELECT 1 FROM tasuki_messages m WHERE m.queue = w.queue AND m.id = w.id)
    LIMIT :limit
);
