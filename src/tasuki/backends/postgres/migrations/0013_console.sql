-- The console (`sql/console.py`): listings by state with and without a job, paused
-- queues, the worker registry and per-job stats.

-- The listings of all jobs read ranges of the due index (waiting and in flight) and of
-- the dead index. Those of one job (its name from the headers) read these: its waiting
-- messages only (a lease's new row version has no entry in it, and the ack none to
-- leave behind; one job's leases are found through the due index) and its dead ones.
-- Each holds only messages that name a job, a condition the listings of every job do
-- not imply: the planner cannot take these for them, however stale its statistics.
CREATE INDEX tasuki_messages_job
    ON tasuki_messages (queue, (headers::jsonb ->> 'tasuki-job'), visible_at, seq)
    WHERE state = 0 AND (headers::jsonb ->> 'tasuki-job') IS NOT NULL;
CREATE INDEX tasuki_messages_job_dead
    ON tasuki_messages (queue, (headers::jsonb ->> 'tasuki-job'), died_at, seq)
    WHERE state = 2 AND (headers::jsonb ->> 'tasuki-job') IS NOT NULL;

-- Paused queues: read by every worker twice a second.
CREATE TABLE tasuki_paused (
    queue     text             PRIMARY KEY,
    paused_at double precision NOT NULL
);

-- Workers as each last announced itself (`info`: the JSON of its `WorkerInfo`), and
-- whether it was asked to stop; dropped a day after it was last seen.
CREATE TABLE tasuki_workers (
    id      text             PRIMARY KEY,
    seen_at double precision NOT NULL,
    info    text             NOT NULL,
    stop    boolean          NOT NULL DEFAULT false
);
CREATE INDEX tasuki_workers_seen ON tasuki_workers (seen_at);

-- Per-job stats in per-minute rollups: the outcomes and the run-time buckets of
-- `core/console.py` by name, added to by each worker's announce, pruned after a day.
CREATE TABLE tasuki_job_stats (
    queue  text             NOT NULL,
    minute double precision NOT NULL,
    job    text             NOT NULL,
    name   text             NOT NULL,
    value  bigint           NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, minute, job, name)
);
CREATE INDEX tasuki_job_stats_minute ON tasuki_job_stats (minute);
