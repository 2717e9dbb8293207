-- release: give leased messages back to `waiting`, visible after a delay.
--
-- KEYS[1]  waiting ZSET
-- KEYS[2]  leased ZSET
-- KEYS[3]  leases HASH (id -> token of the current lease)
-- KEYS[4]  signal LIST
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- then 6 fields per message (from ARGV[2]): id, lease token, delay (µs),
--   refund ('1': without penalty, the attempt is given back; '0': it counts),
--   history event ("retried" / "released"), history detail
--
-- The fence is left alone: it only ever grows, so the next lease still gets a higher
-- one. Blocked leasers are signalled, also for delayed releases, so that they
-- re-read when the next message is due.
--
-- Returns one 1 / 0 per message; a stale token changes nothing.

--- @include "clock"
--- @include "batch"
--- @include "signal"
--- @include "receipts"
--- @include "history"

local waiting, leased, leases = KEYS[1], KEYS[2], KEYS[3]
local base = ARGV[1]
local now = now_us()
local ids, valid = current_receipts(leases, 2, 6)
local results, scores, gone = {}, {}, {}
for k, id in ipairs(ids) do
  local a = valid[k]
  if a then
    local mkey = base .. 'm:' .. id
    if ARGV[a + 3] == '1' then
      redis.call('HINCRBY', mkey, 'attempt', -1)
    end
    push_history(mkey, now, ARGV[a + 4], fence_of(ARGV[a + 1]), ARGV[a + 5])
    gone[#gone + 1] = id
    scores[#scores + 1] = now + tonumber(ARGV[a + 2])
    scores[#scores + 1] = id
    results[k] = 1
  else
    results[k] = 0
  end
end
hdel_many(leases, gone)
zrem_many(leased, gone)
zadd_many(waiting, scores)
signal(KEYS[4], #gone)
return results
