-- records_settle: end each lease record still holding the caller's token (one batch).
--
-- KEYS[i]  the lease record of message i (see records_take.lua)
--
-- ARGV[1]         how long an acked message's record stays (ms), with no owner, so that
--                 a late second delivery of the same copy is refused by records_take
-- ARGV[2]         TTL of a released record (ms): it stays, no owner, not live, for its
--                 count of leases
-- ARGV[1+2i]      the caller's lease token for message i
-- ARGV[2+2i]      '1' if message i was acked, '0' if released
--
-- Returns per message 1 if the token was current, 0 if stale.

--- @include "lease_record"

local now = now_ms()
local out = {}
for i, key in ipairs(KEYS) do
  local copy, receives, fence = held_lease(key, ARGV[1 + 2 * i])
  if copy then
    if ARGV[2 + 2 * i] == '1' then
      redis.call('SET', key, lease_text('', now + tonumber(ARGV[1]), copy, receives, fence),
        'PX', ARGV[1])
    else
      redis.call('SET', key, lease_text('', 0, copy, receives, fence), 'PX', ARGV[2])
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
