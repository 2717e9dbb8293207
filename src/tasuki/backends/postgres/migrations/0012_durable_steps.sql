-- Durable steps (`sql/durable.py`, DESIGN §4c): a message's step records, the signals
-- sent to it and not yet consumed, and what a suspended message waits for ('' for a
-- sleep). Dropped with the message by a maintenance service (`*_forget_orphans`). Steps
-- and signals carry their message's `enqueued_at`: a message enqueued again with the
-- same id (after a purge, say) reads none of what its namesake left.
CREATE TABLE tasuki_steps (
    queue      text             NOT NULL,
    id         text             NOT NULL,
    name       text             NOT NULL,
    occurrence integer          NOT NULL,
    result     bytea            NOT NULL,
    started_at double precision NOT NULL,
    duration   double precision NOT NULL,
    enqueued_at double precision NOT NULL,
    PRIMARY KEY (queue, id, name, occurrence)
);

CREATE TABLE tasuki_signals (
    seq     bigserial PRIMARY KEY,
    queue   text             NOT NULL,
    id      text             NOT NULL,
    name    text             NOT NULL,
    payload bytea            NOT NULL,
    sent_at double precision NOT NULL,
    enqueued_at double precision NOT NULL
);

CREATE INDEX tasuki_signals_message ON tasuki_signals (queue, id, name, seq);

CREATE TABLE tasuki_waits (
    queue  text             NOT NULL,
    id     text             NOT NULL,
    signal text             NOT NULL,
    until  double precision NOT NULL,
    PRIMARY KEY (queue, id)
);
