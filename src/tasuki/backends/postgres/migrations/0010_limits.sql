-- Rate and concurrency limits (`tasuki/backends/sql/limits.py`).
-- `limits`: the JSON [[key, kind, limit, per], ...] of a message enqueued with some (NULL
-- without: the lease reads it and nothing more for unlimited messages); `parked_on`, the
-- concurrency key a message parked over its limit waits for, indexed for the wake-up of a
-- freed slot (only parked messages have an entry).
ALTER TABLE tasuki_messages
    ADD COLUMN limits    text,
    ADD COLUMN parked_on text;

CREATE INDEX tasuki_messages_parked ON tasuki_messages (parked_on, seq)
    WHERE parked_on IS NOT NULL;

-- Concurrency slots: one row per lease holding a key. A row holds its slot while its
-- lease does: the message (queue, id) is in flight under that `token` and its lease has
-- not expired (`visible_at`, which keep and extend move, so a slot lives exactly as long
-- as its lease with nothing else to update). A fenced-out or lapsed lease's row holds
-- nothing; settles delete their rows, admission and the periodic clean-up
-- (`LimitsCleaner`) the dead ones. Admissions and wake-ups
-- of a key are serialized by a transaction-level advisory lock on it.
CREATE TABLE tasuki_slots (
    key   text NOT NULL,
    queue text NOT NULL,
    id    text NOT NULL,
    token text NOT NULL,
    PRIMARY KEY (key, queue, id)
);

CREATE INDEX tasuki_slots_message ON tasuki_slots (queue, id);

-- Rate limits: the starts of each key within its last window (a sliding log), each with
-- the time it leaves the window (`until`: its time plus the limit's `per`); pruned by the
-- admission that adds to its key, and by the periodic clean-up (`LimitsCleaner`).
CREATE TABLE tasuki_rate_starts (
    key   text             NOT NULL,
    until double precision NOT NULL
);

CREATE INDEX tasuki_rate_starts_key ON tasuki_rate_starts (key, until);
