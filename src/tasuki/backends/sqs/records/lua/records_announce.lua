-- records_announce: store a worker's announce and add its job tallies (SQS's console
-- records on a Redis lock store, redis_console.py). Every key carries one hash tag.
--
-- KEYS[1]    the workers' announces (hash: id -> JSON)
-- KEYS[2]    when each was seen (sorted set: id, score ms)
-- KEYS[3]    the workers asked to stop (set)
-- KEYS[3+i]  the tallies of one queue and minute (hash: job "\n" name -> count)
--
-- ARGV[1]    the worker's id
-- ARGV[2]    its announce (JSON)
-- ARGV[3]    how long a worker not seen is kept (ms)
-- ARGV[4]    how long a minute's tallies are kept (ms)
-- then per tally key i: the number of its fields n, then n pairs of field and count
--
-- Returns {1 if a stop was asked of the worker else 0, the server's clock (ms)}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id = ARGV[1]
redis.call('HSET', KEYS[1], id, ARGV[2])
redis.call('ZADD', KEYS[2], now, id)
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[3]))
for _, gone in ipairs(old) do
  redis.call('HDEL', KEYS[1], gone)
  redis.call('ZREM', KEYS[2], gone)
  redis.call('SREM', KEYS[3], gone)
end
local at = 5
for i = 4, #KEYS do
  local n = tonumber(ARGV[at])
  at = at + 1
  for _ = 1, n do
    redis.call('HINCRBY', KEYS[i], ARGV[at], ARGV[at + 1])
    at = at + 2
  end
  redis.call('PEXPIRE', KEYS[i], ARGV[4])
end
return {redis.call('SISMEMBER', KEYS[3], id), now}
