-- records_settle: end each lease record still holding the caller's token (one batch),
-- and settle its message's result record where the settle carries a result.
--
-- KEYS[i]      the lease record of message i (see records_take.lua)
-- KEYS[n+i]    its result record (see includes/result_record.lua), n = #KEYS / 2
--
-- ARGV[1]         how long an acked message's record stays (ms), with no owner, so that
--                 a late second delivery of the same copy is refused by records_take
-- ARGV[2]         TTL of a released record (ms): it stays, no owner, not live, for its
--                 count of leases
-- ARGV[4i-1]      the caller's lease token for message i
-- ARGV[4i]        '1' if message i was acked, '0' if released
-- ARGV[4i+1]      its result's state ('ok', 'failed'), or '' for none
-- ARGV[4i+2]      its result's value (JSON)
--
-- Returns per message 1 if the token was current, 0 if stale.

--- @include "lease_record"
--- @include "result_record"

local now = now_ms()
local n = #KEYS / 2
local out = {}
for i = 1, n do
  local key = KEYS[i]
  local at = 4 * i - 1
  local copy, receives, fence = held_lease(key, ARGV[at])
  if copy then
    if ARGV[at + 1] == '1' then
      redis.call('SET', key, lease_text('', now + tonumber(ARGV[1]), copy, receives, fence),
        'PX', ARGV[1])
    else
      redis.call('SET', key, lease_text('', 0, copy, receives, fence), 'PX', ARGV[2])
    end
    if ARGV[at + 2] ~= '' then
      settle_result(KEYS[n + i], ARGV[at + 2], ARGV[at + 3], now)
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
