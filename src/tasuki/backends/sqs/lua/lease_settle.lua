-- lease_settle: end each lease record still holding the caller's token (one batch).
--
-- KEYS[i]  the lease record of message i (see lease_take.lua)
--
-- ARGV[1]    0: released, the record stays (no owner, not live) for its count of
--            leases; else the message was acked, and its record stays that many ms
--            with no owner, so a late second delivery of the same SQS message is
--            refused by lease_take
-- ARGV[2]    TTL of a released record (ms)
-- ARGV[2+i]  the caller's lease token for message i
--
-- Returns per message 1 if the token was current, 0 if stale.

--- @include "lease_record"

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local grace = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local token = ARGV[2 + i]
  local cur = redis.call('GET', key)
  local owner, copy, receives, fence = nil, '', 0, 0
  if cur then
    local _
    owner, _, copy, receives, fence = read_lease(cur)
  end
  if owner == token and token ~= '' then
    if grace > 0 then
      redis.call('SET', key, lease_text('', now + grace, copy, receives, fence), 'PX', grace)
    else
      redis.call('SET', key, lease_text('', 0, copy, receives, fence), 'PX', ARGV[2])
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
