-- Priorities, cancel and progress.
-- `priority` is the message's level (0..9, `inspect` shows it); `head_start` how many
-- seconds of waiting that level is worth (priority x the backend's `priority_aging`
-- when the message was enqueued): the lease takes due messages by rank, visible_at -
-- head_start, FIFO within a rank, walking `tasuki_messages_rank` in its order. The due
-- index stays for what asks by time (the stats, the next due time of an idle lease).
-- `progress` is what the current lease's job last reported (JSON [fraction, text]),
-- cleared by the next lease.
ALTER TABLE tasuki_messages
    ADD COLUMN priority   smallint         NOT NULL DEFAULT 0,
    ADD COLUMN head_start double precision NOT NULL DEFAULT 0,
    ADD COLUMN progress   text;

CREATE INDEX tasuki_messages_rank ON tasuki_messages (queue, (visible_at - head_start), seq)
    INCLUDE (visible_at) WHERE state < 2;

-- A cancelled message's id is remembered like a finished one's; `cancelled` holds the
-- token of the lease it was running under ('' if it was waiting), NULL for an ack.
ALTER TABLE tasuki_finished ADD COLUMN cancelled text;
