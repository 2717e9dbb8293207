-- in_flight: the current leases of a queue, soonest expiry first.
--
-- KEYS[1]  leased ZSET
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  limit
--
-- Returns an `in_flight` record per message: its id, lease expiry (µs), attempt,
-- max_attempts, fence, enqueued_us, priority ('0' for a field the hash lacks) and
-- progress ('' if none). Read-only.
--- @reply in_flight: id expires_us attempt max_attempts fence enqueued_us priority progress

--- @include "clock"

local now = now_us()
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. int_text(now), '+inf', 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for i = 1, #ids, 2 do
  local f = redis.call('HMGET', ARGV[1] .. 'm:' .. ids[i], 'attempt', 'max_attempts', 'fence',
    'enqueued_us', 'priority', 'progress')
  out[#out + 1] = ids[i]
  out[#out + 1] = ids[i + 1]
  for k = 1, 5 do
    out[#out + 1] = f[k] or '0'
  end
  out[#out + 1] = f[6] or ''
end
return out
