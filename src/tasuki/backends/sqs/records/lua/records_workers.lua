-- records_workers: the workers seen within a while, and the server's clock (SQS's
-- console records on a Redis lock store, redis_console.py); older ones are dropped.
--
-- KEYS[1]    the workers' announces (hash: id -> JSON)
-- KEYS[2]    when each was seen (sorted set: id, score ms)
-- KEYS[3]    the workers asked to stop (set)
--
-- ARGV[1]    how long a worker not seen is kept (ms)
--
-- Returns {the server's clock (ms), then per worker: its id, seen (ms), announce}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[1]))
for _, gone in ipairs(old) do
  redis.call('HDEL', KEYS[1], gone)
  redis.call('ZREM', KEYS[2], gone)
  redis.call('SREM', KEYS[3], gone)
end
local out = {now}
local seen = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #seen, 2 do
  local info = redis.call('HGET', KEYS[1], seen[i])
  if info then
    out[#out + 1] = seen[i]
    out[#out + 1] = seen[i + 1]
    out[#out + 1] = info
  end
end
return out
