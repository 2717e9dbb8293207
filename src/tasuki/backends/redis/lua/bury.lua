-- bury: move leased messages to the dead-letter ZSET with their reason and last error.
--
-- KEYS[1]  leased ZSET
-- KEYS[2]  leases HASH (id -> token of the current lease)
-- KEYS[3]  dead ZSET
-- KEYS[4]  counts HASH (`dead` grows by the messages buried)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- then 7 fields per message (from ARGV[2]): id, lease token, reason, error type
--   ('' = no error), error message, error traceback, history detail
--
-- The message keeps its body, headers and attempt count; it drops its uniqueness lock
-- if it still owns it.
--
-- Returns one 1 / 0 per message; a stale token changes nothing.

--- @include "clock"
--- @include "batch"
--- @include "to_dead"
--- @include "receipts"
--- @include "history"

local leased, leases, dead = KEYS[1], KEYS[2], KEYS[3]
local base = ARGV[1]
local now = now_us()
local ids, valid = current_receipts(leases, 2, 7)
local results, gone = {}, {}
for k, id in ipairs(ids) do
  local a = valid[k]
  if a then
    gone[#gone + 1] = id
    local mkey = base .. 'm:' .. id
    push_history(mkey, now, 'dead', fence_of(ARGV[a + 1]), ARGV[a + 6])
    to_dead(dead, mkey, id, now, ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5])
    results[k] = 1
  else
    results[k] = 0
  end
end
hdel_many(leases, gone)
zrem_many(leased, gone)
if #gone > 0 then
  redis.call('HINCRBY', KEYS[4], 'dead', #gone)
end
return results
