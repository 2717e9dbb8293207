-- announce: store a worker's announce in the registry, and drop the workers not seen for
-- a day. The registry is cross-queue, so on Redis Cluster it has a slot of its own: its
-- three keys share the hash tag `{workers}` (`KeySpace.workers`).
--
-- KEYS[1]  info HASH (worker id -> its announce, JSON)
-- KEYS[2]  seen ZSET (worker id -> when it last announced, µs of the server's clock)
-- KEYS[3]  stop SET (ids of the workers asked to stop)
--
-- ARGV[1]  worker id
-- ARGV[2]  its announce (JSON)
-- ARGV[3]  how long a worker is kept after its last announce (µs)
--
-- Returns 1 if a stop was asked of this worker (`stop_worker`), else 0.

--- @include "clock"
--- @include "batch"

local now = now_us()
local id = ARGV[1]
redis.call('HSET', KEYS[1], id, ARGV[2])
redis.call('ZADD', KEYS[2], now, id)
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[3]), 'LIMIT', 0, 100)
if #old > 0 then
  hdel_many(KEYS[1], old)
  zrem_many(KEYS[2], old)
  each_chunk('SREM', KEYS[3], old)
end
return redis.call('SISMEMBER', KEYS[3], id)
