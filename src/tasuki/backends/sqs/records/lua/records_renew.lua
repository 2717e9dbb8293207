-- records_renew: extend each lease record still holding the caller's token (one batch).
--
-- KEYS[i]    the lease record of message i (see records_take.lua)
--
-- ARGV[1]    TTL of a record (ms)
-- ARGV[2]    the new visibility timeout (ms): the lease now lasts that long from now
-- ARGV[2+i]  the caller's lease token for message i
--
-- Returns per message 1 if the token was current (renewed), 0 if stale.

--- @include "lease_record"

local now = now_ms()
local vt = tonumber(ARGV[2])
local out = {}
for i, key in ipairs(KEYS) do
  local token = ARGV[2 + i]
  local copy, receives, fence, progress = held_lease(key, token)
  if copy then
    redis.call('SET', key, lease_text(token, now + vt, copy, receives, fence, progress), 'PX',
      ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
