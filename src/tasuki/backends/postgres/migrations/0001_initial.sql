-- The first version of the PostgreSQL schema; runs inside the migration's transaction
-- with search_path set to the backend's schema.

-- One row per message, in every state. `visible_at` means "when it becomes ready" for a
-- waiting message and "when its lease expires" for one in flight, so a single ordered
-- partial index finds both new work and expired leases (no separate sweeper).
CREATE TABLE tasuki_messages (
    seq                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue              text             NOT NULL,
    id                 text             NOT NULL,
    body               bytea            NOT NULL,
    headers            text             NOT NULL,
    state              smallint         NOT NULL DEFAULT 0,  -- 0 waiting, 1 in flight, 2 dead
    visible_at         double precision NOT NULL,
    enqueued_at        double precision NOT NULL,
    attempt            integer          NOT NULL DEFAULT 0,
    max_attempts       integer          NOT NULL,
    visibility_timeout double precision,
    keep_id            double precision NOT NULL DEFAULT 0,
    unique_key         text,
    token              text,
    fence              bigint           NOT NULL DEFAULT 0,
    reason             text,
    error_type         text,
    error_message      text,
    error_traceback    text,
    died_at            double precision
);

CREATE UNIQUE INDEX tasuki_messages_id ON tasuki_messages (queue, id);

-- The lease walks this index from its start, one condition per column (no OR that would
-- defeat it), so its plan stays the same at any depth.
CREATE INDEX tasuki_messages_due ON tasuki_messages (queue, visible_at, seq) WHERE state < 2;

-- Stats count ranges of this index; dead letters page through it.
CREATE INDEX tasuki_messages_state ON tasuki_messages (queue, state, visible_at);
CREATE INDEX tasuki_messages_dead ON tasuki_messages (queue, died_at DESC, seq DESC)
    WHERE state = 2;

-- Ids of finished messages, remembered for their window so a retried enqueue is a no-op.
CREATE TABLE tasuki_finished (
    queue      text             NOT NULL,
    id         text             NOT NULL,
    expires_at double precision NOT NULL,
    PRIMARY KEY (queue, id)
);

CREATE INDEX tasuki_finished_expiry ON tasuki_finished (expires_at);

-- Locks with an owner and an expiry: dedup guards and uniqueness.
CREATE TABLE tasuki_locks (
    key        text PRIMARY KEY,
    owner      text             NOT NULL,
    expires_at double precision NOT NULL
);

CREATE INDEX tasuki_locks_expiry ON tasuki_locks (expires_at);
