-- extend: push lease expiry to now + visibility timeout, if the lease is the caller's.
--
-- KEYS[1]  leased ZSET
-- KEYS[2]  leases HASH (id -> token of the current lease)
-- KEYS[3]  limited HASH (messages with rate or concurrency limits: id -> limits)
--
-- ARGV[1]  visibility timeout (µs)
-- ARGV[2]  queue key base, `<prefix>{<queue>}:`
-- then pairs (from ARGV[3]): id, lease token
--
-- Returns one 1 / 0 per pair; a stale token changes nothing. A kept lease keeps its
-- concurrency slots until its new expiry.

--- @include "clock"
--- @include "batch"
--- @include "signal"
--- @include "limits"

local expiry = now_us() + tonumber(ARGV[1])
local base = ARGV[2]
local ids = {}
for i = 3, #ARGV, 2 do
  ids[#ids + 1] = ARGV[i]
end
local current = hmget_many(KEYS[2], ids)
local results, expiries, held = {}, {}, {}
for k, id in ipairs(ids) do
  if current[k] and current[k] == ARGV[2 * k + 2] then
    expiries[#expiries + 1] = expiry
    expiries[#expiries + 1] = id
    results[k] = 1
    held[#held + 1] = id
  else
    results[k] = 0
  end
end
zadd_many(KEYS[1], expiries)
if #held > 0 and redis.call('EXISTS', KEYS[3]) == 1 then
  local lims = hmget_many(KEYS[3], held)
  for k, id in ipairs(held) do
    if lims[k] then
      extend_slots(base, id, cjson.decode(lims[k]), expiry)
    end
  end
end
return results
