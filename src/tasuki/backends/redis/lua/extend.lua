-- extend: push lease expiry to now + visibility timeout, if the lease is the caller's.
--
-- KEYS[1]  leased ZSET
-- KEYS[2]  leases HASH (id -> token of the current lease)
--
-- ARGV[1]  visibility timeout (µs)
-- then pairs (from ARGV[2]): id, lease token
--
-- Returns one 1 / 0 per pair; a stale token changes nothing.

--- @include "clock"
--- @include "batch"

local expiry = now_us() + tonumber(ARGV[1])
local ids = {}
for i = 2, #ARGV, 2 do
  ids[#ids + 1] = ARGV[i]
end
local current = hmget_many(KEYS[2], ids)
local results, expiries = {}, {}
for k, id in ipairs(ids) do
  if current[k] and current[k] == ARGV[2 * k + 1] then
    expiries[#expiries + 1] = expiry
    expiries[#expiries + 1] = id
    results[k] = 1
  else
    results[k] = 0
  end
end
zadd_many(KEYS[1], expiries)
return results
