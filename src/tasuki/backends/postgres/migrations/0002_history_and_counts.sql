-- How the last few leases of a message ended (`inspect`): written when a lease ends in a
-- retry, a release, a burial, a lost lease, or an ack of a message whose id is kept.
-- Bounded per message on insert; rows of messages gone (and not kept as finished) are
-- dropped by the periodic clean-up.
CREATE TABLE tasuki_history (
    seq    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue  text             NOT NULL,
    id     text             NOT NULL,
    at     double precision NOT NULL,
    event  text             NOT NULL,
    fence  bigint           NOT NULL,
    detail text             NOT NULL
);

CREATE INDEX tasuki_history_message ON tasuki_history (queue, id, seq);

-- Messages acked and dead-lettered per queue since the store began (the dashboard's
-- rates), spread over a few shards per queue so settling transactions seldom meet.
CREATE TABLE tasuki_counts (
    queue text    NOT NULL,
    shard integer NOT NULL,
    acked bigint  NOT NULL DEFAULT 0,
    dead  bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, shard)
);
