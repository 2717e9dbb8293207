-- Acked messages, kept when the backend runs with `?archive=true` (the `ack` statement
-- moves each row here in the same statement that deletes it), pruned in batches once
-- older than `archive_days`. Without the option the table stays empty.
-- An id may be enqueued again once its window is over, so (queue, id) is not unique.
CREATE TABLE tasuki_archive (
    queue       text             NOT NULL,
    id          text             NOT NULL,
    body        bytea            NOT NULL,
    headers     text             NOT NULL,
    attempt     integer          NOT NULL,
    max_attempts integer         NOT NULL,
    fence       bigint           NOT NULL,
    enqueued_at double precision NOT NULL,
    acked_at    double precision NOT NULL
);

-- "What became of message X": one index on the id.
CREATE INDEX tasuki_archive_id ON tasuki_archive (queue, id);
-- Rows arrive in `acked_at` order, so a BRIN index (a few pages for millions of rows,
-- next to nothing to maintain per ack) finds the oldest for pruning.
CREATE INDEX tasuki_archive_acked ON tasuki_archive USING brin (acked_at);
