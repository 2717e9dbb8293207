-- The SQLite schema. Every statement is idempotent: each connection runs the file once.

-- One row per message, in every state. `visible_at` means "when it becomes ready" for a
-- waiting message and "when its lease expires" for one in flight, so a single ordered
-- index finds both new work and expired leases. `head_start` is how many seconds of
-- waiting its priority is worth (priority x the backend's `priority_aging` when it was
-- enqueued): the lease takes due messages by rank, visible_at - head_start. `progress`
-- is what the current lease's job last reported (JSON [fraction, text]). `limits`: the
-- JSON [[key, kind, limit, per], ...] of a message enqueued with rate or concurrency
-- limits (NULL without); `parked_on`, the concurrency key a parked message waits for.
CREATE TABLE IF NOT EXISTS tasuki_messages (
    seq                INTEGER PRIMARY KEY,
    queue              TEXT    NOT NULL,
    id                 TEXT    NOT NULL,
    body               BLOB    NOT NULL,
    headers            TEXT    NOT NULL,
    state              INTEGER NOT NULL DEFAULT 0,  -- 0 waiting, 1 in flight, 2 dead
    visible_at         REAL    NOT NULL,
    enqueued_at        REAL    NOT NULL,
    attempt            INTEGER NOT NULL DEFAULT 0,
    max_attempts       INTEGER NOT NULL,
    visibility_timeout REAL,
    keep_id            REAL    NOT NULL DEFAULT 0,
    unique_key         TEXT,
    token              TEXT,
    fence              INTEGER NOT NULL DEFAULT 0,
    reason             TEXT,
    error_type         TEXT,
    error_message      TEXT,
    error_traceback    TEXT,
    died_at            REAL,
    priority           INTEGER NOT NULL DEFAULT 0,
    head_start         REAL    NOT NULL DEFAULT 0,
    progress           TEXT,
    limits             TEXT,
    parked_on          TEXT
);

CREATE UNIQUE INDEX IF NOT EXISTS tasuki_messages_id ON tasuki_messages (queue, id);

-- Leasing walks this index from its start, by rank (FIFO within a rank): O(log n)
-- whatever the backlog. (A database made before priorities had `tasuki_messages_due`,
-- on (queue, visible_at, seq): `SQLiteDialect.conn` drops it.)
CREATE INDEX IF NOT EXISTS tasuki_messages_rank
    ON tasuki_messages (queue, visible_at - head_start, seq) WHERE state < 2;

-- Stats count ranges of this index instead of scanning the table; the next due time
-- and the oldest ready message are its first entries of states 0 and 1.
CREATE INDEX IF NOT EXISTS tasuki_messages_state ON tasuki_messages (queue, state, visible_at);

-- Messages parked for a slot of a concurrency key (`parked_on`), oldest first: a freed
-- slot wakes the first of them. Only parked messages have an entry.
CREATE INDEX IF NOT EXISTS tasuki_messages_parked
    ON tasuki_messages (parked_on, seq) WHERE parked_on IS NOT NULL;

-- Ids of finished messages, remembered for their window so a retried enqueue is a no-op.
-- `cancelled` is NULL for an acked message; for a cancelled one the token of the lease
-- it was running under ('' if it was waiting), so that lease's keeper learns it.
CREATE TABLE IF NOT EXISTS tasuki_finished (
    queue      TEXT NOT NULL,
    id         TEXT NOT NULL,
    expires_at REAL NOT NULL,
    cancelled  TEXT,
    PRIMARY KEY (queue, id)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS tasuki_finished_expiry ON tasuki_finished (expires_at);

-- Concurrency slots (`sql/limits.py`): one row per lease holding a key. A row holds its
-- slot while its lease does: the message (queue, id) is in flight under that `token` and
-- its lease has not expired (`visible_at`, which keep and extend move, so a slot lives
-- exactly as long as its lease with nothing else to update). A fenced-out or lapsed
-- lease's row holds nothing; settles delete their rows, admission and the periodic
-- clean-up (`LimitsCleaner`) the dead ones.
CREATE TABLE IF NOT EXISTS tasuki_slots (
    key   TEXT NOT NULL,
    queue TEXT NOT NULL,
    id    TEXT NOT NULL,
    token TEXT NOT NULL,
    PRIMARY KEY (key, queue, id)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS tasuki_slots_message ON tasuki_slots (queue, id);

-- Rate limits: the starts of each key within its last window (a sliding log), each with
-- the time it leaves the window (`until`: its time plus the limit's `per`); pruned by the
-- admission that adds to its key, and by the periodic clean-up (`LimitsCleaner`).
CREATE TABLE IF NOT EXISTS tasuki_rate_starts (
    key   TEXT NOT NULL,
    until REAL NOT NULL
);

CREATE INDEX IF NOT EXISTS tasuki_rate_starts_key ON tasuki_rate_starts (key, until);

-- Locks with an owner and an expiry: dedup guards and uniqueness.
CREATE TABLE IF NOT EXISTS tasuki_locks (
    key        TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    expires_at REAL NOT NULL
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS tasuki_locks_expiry ON tasuki_locks (expires_at);

-- How the last few leases of a message ended (`inspect`): written when a lease ends in a
-- retry, a release, a burial, a lost lease, or an ack of a message whose id is kept.
-- Bounded per message on insert; rows of messages gone (and not kept as finished) are
-- dropped by the periodic clean-up.
CREATE TABLE IF NOT EXISTS tasuki_history (
    seq    INTEGER PRIMARY KEY,
    queue  TEXT    NOT NULL,
    id     TEXT    NOT NULL,
    at     REAL    NOT NULL,
    event  TEXT    NOT NULL,
    fence  INTEGER NOT NULL,
    detail TEXT    NOT NULL
);

CREATE INDEX IF NOT EXISTS tasuki_history_message ON tasuki_history (queue, id, seq);

-- Messages acked and dead-lettered per queue since the store began (the dashboard's
-- rates), spread over a few shards per queue.
CREATE TABLE IF NOT EXISTS tasuki_counts (
    queue TEXT    NOT NULL,
    shard INTEGER NOT NULL,
    acked INTEGER NOT NULL DEFAULT 0,
    dead  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, shard)
) WITHOUT ROWID;

-- How many messages of each queue wait (ready or delayed) and how many are dead, changed
-- by the writes that change them (`count_depth`), so that stats read these two numbers
-- rather than count every waiting message. Filled from the messages once, when a
-- database made before it is first opened (`SQLiteDialect.conn`).
CREATE TABLE IF NOT EXISTS tasuki_depth (
    queue   TEXT    PRIMARY KEY,
    waiting INTEGER NOT NULL DEFAULT 0,
    dead    INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Reliability meters per queue (`tasuki.core.reliability`): redeliveries, leases lost and
-- the buckets of the expiry-to-start and heartbeat-lag histograms, by name, counted at
-- lease time and added by workers' lease keepers; a few shards per queue, like the counts.
CREATE TABLE IF NOT EXISTS tasuki_meters (
    queue TEXT    NOT NULL,
    name  TEXT    NOT NULL,
    shard INTEGER NOT NULL,
    value INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, name, shard)
) WITHOUT ROWID;

-- Results of messages whose job keeps them (`keep_result`, `keep` seconds): "pending"
-- from the enqueue, then "ok" (`value`: the JSON return value) or "failed" (`value`: the
-- JSON of the last error and the reason), written in the settle's transaction under its
-- token check, kept until `expires_at` (NULL while pending).
CREATE TABLE IF NOT EXISTS tasuki_results (
    queue      TEXT NOT NULL,
    id         TEXT NOT NULL,
    keep       REAL NOT NULL,
    state      TEXT NOT NULL DEFAULT 'pending',
    value      BLOB,
    expires_at REAL,
    PRIMARY KEY (queue, id)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS tasuki_results_expiry
    ON tasuki_results (expires_at) WHERE expires_at IS NOT NULL;

-- Workflows (`sql/flows.py`). A flow's record: `static` the JSON written once when it
-- starts (`FlowRecord.static_json`), then its `result` (the JSON of its final value),
-- its first `failure` (JSON) and `cancelled`, each written once, in the settles of its
-- steps (or `cancel_flow`); kept until `expires_at`.
CREATE TABLE IF NOT EXISTS tasuki_flows (
    id         TEXT    NOT NULL PRIMARY KEY,
    static     TEXT    NOT NULL,
    created_at REAL    NOT NULL,
    expires_at REAL    NOT NULL,
    result     BLOB,
    failure    TEXT,
    cancelled  INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS tasuki_flows_expiry ON tasuki_flows (expires_at);

-- The flows that have a failure, for a redrive to find those it resumes.
CREATE INDEX IF NOT EXISTS tasuki_flows_failed ON tasuki_flows (id) WHERE failure IS NOT NULL;

-- A group's barrier: set membership by slot (`tasuki_flow_slots`, first writer wins),
-- complete when it holds `size` slots; `value` is then the JSON array of its slots.
CREATE TABLE IF NOT EXISTS tasuki_flow_barriers (
    flow       TEXT    NOT NULL,
    barrier    TEXT    NOT NULL,
    size       INTEGER NOT NULL,
    filled     INTEGER NOT NULL DEFAULT 0,  -- its slots filled: kept by `flow_slot_taken`
    value      BLOB,
    expires_at REAL    NOT NULL,
    PRIMARY KEY (flow, barrier)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS tasuki_flow_barriers_expiry ON tasuki_flow_barriers (expires_at);

CREATE TABLE IF NOT EXISTS tasuki_flow_slots (
    flow       TEXT    NOT NULL,
    barrier    TEXT    NOT NULL,
    slot       INTEGER NOT NULL,
    value      BLOB    NOT NULL,
    expires_at REAL    NOT NULL,
    PRIMARY KEY (flow, barrier, slot)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS tasuki_flow_slots_expiry ON tasuki_flow_slots (expires_at);

-- The console (`sql/console.py`). The listings of dead letters by when they died, and
-- of one job's waiting (ready and delayed) and dead messages (the job's name from the
-- headers), oldest or newest first: a range of an index each (the rowid, `seq`, ends
-- every entry). Only waiting messages are in the job index: a lease takes its entry
-- out and the ack finds none to remove, so leasing and acking write no more pages for
-- it (one job's messages in flight, as many as the workers run, are found through the
-- state index).
CREATE INDEX IF NOT EXISTS tasuki_messages_dead
    ON tasuki_messages (queue, died_at) WHERE state = 2;

CREATE INDEX IF NOT EXISTS tasuki_messages_job
    ON tasuki_messages (queue, json_extract(headers, '$."tasuki-job"'), visible_at)
    WHERE state = 0;

CREATE INDEX IF NOT EXISTS tasuki_messages_job_dead
    ON tasuki_messages (queue, json_extract(headers, '$."tasuki-job"'), died_at)
    WHERE state = 2;

-- Paused queues: read by every worker twice a second.
CREATE TABLE IF NOT EXISTS tasuki_paused (
    queue     TEXT PRIMARY KEY,
    paused_at REAL NOT NULL
) WITHOUT ROWID;

-- Workers as each last announced itself (`info`: the JSON of its `WorkerInfo`), and
-- whether it was asked to stop; dropped a day after it was last seen.
CREATE TABLE IF NOT EXISTS tasuki_workers (
    id      TEXT    PRIMARY KEY,
    seen_at REAL    NOT NULL,
    info    TEXT    NOT NULL,
    stop    INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS tasuki_workers_seen ON tasuki_workers (seen_at);

-- Per-job stats in per-minute rollups: the outcomes and the run-time buckets of
-- `core/console.py` by name, added to by each worker's announce, pruned after a day.
CREATE TABLE IF NOT EXISTS tasuki_job_stats (
    queue  TEXT    NOT NULL,
    minute REAL    NOT NULL,
    job    TEXT    NOT NULL,
    name   TEXT    NOT NULL,
    value  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, minute, job, name)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS tasuki_job_stats_minute ON tasuki_job_stats (minute);
-- Durable steps (`sql/durable.py`, DESIGN §4c). A message's step records, by name and
-- occurrence, each written under its lease: `result` the step's JSON, `started_at` and
-- `duration` in seconds. Signals sent to a message and not yet consumed, oldest first.
-- Both carry their message's `enqueued_at`: a message enqueued again with the same id
-- (after a purge, say) reads none of what its namesake left.
-- What a suspended message waits for: a signal ('' for a sleep) until `until`. All three
-- are dropped with the message (`*_forget_orphans`, a maintenance service).
CREATE TABLE IF NOT EXISTS tasuki_steps (
    queue      TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    occurrence INTEGER NOT NULL,
    result     BLOB    NOT NULL,
    started_at REAL    NOT NULL,
    duration   REAL    NOT NULL,
    enqueued_at REAL   NOT NULL,
    PRIMARY KEY (queue, id, name, occurrence)
);

CREATE TABLE IF NOT EXISTS tasuki_signals (
    seq     INTEGER PRIMARY KEY,
    queue   TEXT NOT NULL,
    id      TEXT NOT NULL,
    name    TEXT NOT NULL,
    payload BLOB NOT NULL,
    sent_at REAL NOT NULL,
    enqueued_at REAL NOT NULL
);

CREATE INDEX IF NOT EXISTS tasuki_signals_message ON tasuki_signals (queue, id, name, seq);

CREATE TABLE IF NOT EXISTS tasuki_waits (
    queue  TEXT NOT NULL,
    id     TEXT NOT NULL,
    signal TEXT NOT NULL,
    until  REAL NOT NULL,
    PRIMARY KEY (queue, id)
) WITHOUT ROWID;
