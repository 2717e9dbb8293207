-- records_listing_put: enter (or replace) the listed entries of one queue in one state
-- (the console's listings SQS keeps in this lock store: `Listing`, records/listing.py).
--
-- KEYS[1]         the queue's listing tag T ("{...}"): every key below starts with it, so
--                 they share one Cluster slot. T:STATE is a sorted set of the listed ids
--                 by time (score: epoch seconds), T:STATE:job:JOB the same per job, and
--                 T:STATE:e:ID a hash of one entry (job, token, body, headers, info, at).
--
-- ARGV[1]         the state: 'in_flight' or 'dead'
-- ARGV[2]         entries scored below this are swept from the sets (their hashes have
--                 expired)
-- ARGV[3+8(i-1)]  entry i's id, then its time, job, lease token, body, headers (JSON),
--                 info (JSON)
-- ARGV[10+8(i-1)] ... and its hash's TTL (ms)
--
-- Returns nothing.

local tag, state, swept = KEYS[1], ARGV[1], ARGV[2]
local set = tag .. ':' .. state
local jobs = {}
for at = 3, #ARGV, 8 do
  local id, score, job = ARGV[at], ARGV[at + 1], ARGV[at + 2]
  local entry = set .. ':e:' .. id
  local before = redis.call('HGET', entry, 'job')
  if before and before ~= job then
    redis.call('ZREM', set .. ':job:' .. before, id)
  end
  redis.call('HSET', entry, 'job', job, 'token', ARGV[at + 3], 'body', ARGV[at + 4],
    'headers', ARGV[at + 5], 'info', ARGV[at + 6], 'at', score)
  redis.call('PEXPIRE', entry, ARGV[at + 7])
  redis.call('ZADD', set, score, id)
  redis.call('ZADD', set .. ':job:' .. job, score, id)
  jobs[job] = true
end
redis.call('ZREMRANGEBYSCORE', set, '-inf', '(' .. swept)
for job in pairs(jobs) do
  redis.call('ZREMRANGEBYSCORE', set .. ':job:' .. job, '-inf', '(' .. swept)
end
return 0
