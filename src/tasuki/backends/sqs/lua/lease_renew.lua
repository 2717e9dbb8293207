-- lease_renew: extend each lease record still holding the caller's token (one batch).
--
-- KEYS[i]    the lease record of message i (see lease_take.lua)
--
-- ARGV[1]    TTL of a record (ms)
-- ARGV[2]    the new visibility timeout (ms): the lease now lasts that long from now
-- ARGV[2+i]  the caller's lease token for message i
--
-- Returns per message 1 if the token was current (renewed), 0 if stale.

--- @include "lease_record"

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local vt = tonumber(ARGV[2])
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
    redis.call('SET', key, lease_text(token, now + vt, copy, receives, fence), 'PX', ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
