-- workers: the workers announced within the time a worker is kept, and ask one to stop.
--
-- KEYS[1]  info HASH (worker id -> its announce, JSON)
-- KEYS[2]  seen ZSET (worker id -> when it last announced, µs)
-- KEYS[3]  stop SET (ids of the workers asked to stop)
--
-- ARGV[1]  how long a worker is kept after its last announce (µs)
-- ARGV[2]  '' to list them; a worker id to ask that worker to stop
--
-- Listing returns {now µs, then a `worker` record per worker}; asking to stop returns 1,
-- or 0 if no such worker is kept. Read-only but for the stop.
--- @reply worker: id seen_us info

--- @include "clock"
--- @include "batch"

local now = now_us()
local since = now - tonumber(ARGV[1])
if ARGV[2] ~= '' then
  local seen = redis.call('ZSCORE', KEYS[2], ARGV[2])
  if not seen or tonumber(seen) < since then
    return 0
  end
  redis.call('SADD', KEYS[3], ARGV[2])
  return 1
end
local kept = redis.call('ZRANGEBYSCORE', KEYS[2], since, '+inf', 'WITHSCORES')
local ids = {}
for k = 1, #kept, 2 do
  ids[#ids + 1] = kept[k]
end
local infos = hmget_many(KEYS[1], ids)
local out = {int_text(now)}
for k, id in ipairs(ids) do
  if infos[k] then
    out[#out + 1] = id
    out[#out + 1] = kept[2 * k]
    out[#out + 1] = infos[k]
  end
end
return out
