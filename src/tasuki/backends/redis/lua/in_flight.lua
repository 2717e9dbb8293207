-- in_flight: the current leases of a queue, soonest expiry first.
--
-- KEYS[1]  leased ZSET
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  limit
--
-- Returns an `in_flight` record per message: its id, lease expiry (µs), attempt,
-- max_attempts, fence and enqueued_us ('0' for a field the hash lacks). Read-only.
--- @reply in_flight: id expires_us attempt max_attempts fence enqueued_us

--- @include "clock"

local now = now_us()
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. int_text(now), '+inf', 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for i = 1, #ids, 2 do
  local f = redis.call('HMGET', ARGV[1] .. 'm:' .. ids[i], 'attempt', 'max_attempts', 'fence',
    'enqueued_us')
  out[#out + 1] = ids[i]
  out[#out + 1] = ids[i + 1]
  for k = 1, 4 do
    out[#out + 1] = f[k] or '0'
  end
end
return out
