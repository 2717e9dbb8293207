-- Workflows (`sql/flows.py`). A flow's record: `static` the JSON written once when it
-- starts (`FlowRecord.static_json`), then its `result` (the JSON of its final value),
-- its first `failure` (JSON) and `cancelled`, each written once, in the settles of its
-- steps (or `cancel_flow`); kept until `expires_at`. New tables: nothing existing is
-- locked.
CREATE TABLE tasuki_flows (
    id         text             PRIMARY KEY,
    static     text             NOT NULL,
    created_at double precision NOT NULL,
    expires_at double precision NOT NULL,
    result     bytea,
    failure    text,
    cancelled  boolean          NOT NULL DEFAULT false
);

CREATE INDEX tasuki_flows_expiry ON tasuki_flows (expires_at);

-- A group's barrier: set membership by slot (`tasuki_flow_slots`, first writer wins),
-- complete when it holds `size` slots; `value` is then the JSON array of its slots. Its
-- row is locked by each fill (`flow_barrier`), so that the settles filling one barrier
-- take turns and exactly one of them sees it complete.
CREATE TABLE tasuki_flow_barriers (
    flow       text             NOT NULL,
    barrier    text             NOT NULL,
    size       integer          NOT NULL,
    value      bytea,
    expires_at double precision NOT NULL,
    PRIMARY KEY (flow, barrier)
);

CREATE INDEX tasuki_flow_barriers_expiry ON tasuki_flow_barriers (expires_at);

CREATE TABLE tasuki_flow_slots (
    flow       text             NOT NULL,
    barrier    text             NOT NULL,
    slot       integer          NOT NULL,
    value      bytea            NOT NULL,
    expires_at double precision NOT NULL,
    PRIMARY KEY (flow, barrier, slot)
);

CREATE INDEX tasuki_flow_slots_expiry ON tasuki_flow_slots (expires_at);
