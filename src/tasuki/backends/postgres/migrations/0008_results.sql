-- Results of messages whose job keeps them (`keep_result`, `keep` seconds): "pending"
-- from the enqueue, then "ok" (`value`: the JSON return value) or "failed" (`value`: the
-- JSON of the last error and the reason), written in the settle's transaction under its
-- token check, kept until `expires_at` (NULL while pending). A new table: nothing
-- existing is locked.
CREATE TABLE tasuki_results (
    queue      text             NOT NULL,
    id         text             NOT NULL,
    keep       double precision NOT NULL,
    state      text             NOT NULL DEFAULT 'pending',
    value      bytea,
    expires_at double precision,
    PRIMARY KEY (queue, id)
);

CREATE INDEX tasuki_results_expiry ON tasuki_results (expires_at) WHERE expires_at IS NOT NULL;
