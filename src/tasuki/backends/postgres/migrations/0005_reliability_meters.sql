-- Reliability meters per queue (`tasuki.core.reliability`): redeliveries, leases lost and
-- the buckets of the expiry-to-start and heartbeat-lag histograms, by name, counted at
-- lease time and added by workers' lease keepers; a few shards per queue, like the counts.
CREATE TABLE tasuki_meters (
    queue text    NOT NULL,
    name  text    NOT NULL,
    shard integer NOT NULL,
    value bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, name, shard)
);
