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
