-- Named queries of the console's listings a SQLite lock store keeps for SQS
-- (`Listing`, listing.py; sqlite_listing.py), in a table of their own in the lock
-- database. `queue` is the records' namespace + the queue's name; `state` is
-- 'in_flight' or 'dead'; `at` when the lease expires (in flight) or when the message
-- died (dead); times are seconds since the epoch.

-- name: create_listed
CREATE TABLE IF NOT EXISTS tasuki_sqs_listed (
    queue TEXT NOT NULL,
    state TEXT NOT NULL,
    id TEXT NOT NULL,
    at REAL NOT NULL,
    job TEXT NOT NULL,
    token TEXT NOT NULL,
    body BLOB NOT NULL,
    headers TEXT NOT NULL,
    info TEXT NOT NULL,
    expires REAL NOT NULL,
    PRIMARY KEY (queue, state, id)
) WITHOUT ROWID;

-- name: create_listed_at
CREATE INDEX IF NOT EXISTS tasuki_sqs_listed_at ON tasuki_sqs_listed (queue, state, at, id);

-- name: create_listed_job
CREATE INDEX IF NOT EXISTS tasuki_sqs_listed_job
ON tasuki_sqs_listed (queue, state, job, at, id);

-- name: put
INSERT OR REPLACE INTO tasuki_sqs_listed
    (queue, state, id, at, job, token, body, headers, info, expires)
VALUES (:queue, :state, :id, :at, :job, :token, :body, :headers, :info, :expires);

-- name: drop
-- `:token` '' for any entry of the message.
DELETE FROM tasuki_sqs_listed
WHERE queue = :queue AND state = :state AND id = :id AND (:token = '' OR token = :token);

-- name: renew
UPDATE tasuki_sqs_listed SET at = :until, expires = :expires
WHERE queue = :queue AND state = 'in_flight' AND id = :id AND token = :token;

-- name: clear
DELETE FROM tasuki_sqs_listed WHERE queue = :queue AND state = :state;

-- name: sweep_listed
DELETE FROM tasuki_sqs_listed WHERE expires <= :now;

-- name: page_oldest
-- After (:at, :id), later than :floor, oldest first: one range of the index.
SELECT id, at, job, token, body, headers, info FROM tasuki_sqs_listed
WHERE queue = :queue AND state = :state AND at > :floor AND (at, id) > (:at, :id)
ORDER BY at, id LIMIT :limit;

-- name: page_newest
SELECT id, at, job, token, body, headers, info FROM tasuki_sqs_listed
WHERE queue = :queue AND state = :state AND at > :floor AND (at, id) < (:at, :id)
ORDER BY at DESC, id DESC LIMIT :limit;

-- name: page_job_oldest
SELECT id, at, job, token, body, headers, info FROM tasuki_sqs_listed
WHERE queue = :queue AND state = :state AND job = :job AND at > :floor
    AND (at, id) > (:at, :id)
ORDER BY at, id LIMIT :limit;

-- name: page_job_newest
SELECT id, at, job, token, body, headers, info FROM tasuki_sqs_listed
WHERE queue = :queue AND state = :state AND job = :job AND at > :floor
    AND (at, id) < (:at, :id)
ORDER BY at DESC, id DESC LIMIT :limit;

-- name: find
SELECT id, at, job, token, body, headers, info FROM tasuki_sqs_listed
WHERE queue = :queue AND state = :state AND id = :id;
