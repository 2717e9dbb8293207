-- purge: delete up to `limit` messages of a queue, in any state (the backend loops, so
-- a queue of millions never blocks Redis for seconds in one script).
--
-- KEYS[1]  waiting ZSET
-- KEYS[2]  leased ZSET
-- KEYS[3]  dead ZSET
-- KEYS[4]  leases HASH (id -> token of the current lease)
-- KEYS[5]  keep HASH (finished-id windows)
-- KEYS[6]  signal LIST
-- KEYS[7]  delayed ZSET (delayed messages of priority > 0)
-- KEYS[8]  results HASH (pending results)
-- KEYS[9]  waiters HASH (ids someone waits on in `wait_result`)
-- KEYS[10] limited HASH (messages with rate or concurrency limits)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  limit
--
-- A waiting message's uniqueness lock goes with it (if it still owns it); a message in
-- flight keeps its lock, which belongs to the running job now. Finished-id records
-- (`done:<id>`) keep their windows. Leases of purged messages die with them, and so do
-- their result records, pending or not. The concurrency slots a purged lease held go at
-- once, to parked messages that are still there, and a purged parked message leaves
-- its parked sets (includes/limits.lua).
--
-- Returns the number deleted; fewer than `limit` means the queue is empty.

--- @include "clock"
--- @include "batch"
--- @include "signal"
--- @include "limits"

local base = ARGV[1]
local limit = tonumber(ARGV[2])
local removed = 0
local now = now_us()
for _, k in ipairs({1, 7, 2, 3}) do
  if removed >= limit then
    break
  end
  local ids = redis.call('ZRANGE', KEYS[k], 0, limit - removed - 1)
  local doomed = {}
  for i, id in ipairs(ids) do
    local mkey = base .. 'm:' .. id
    if k == 1 or k == 7 then
      local lock = redis.call('HGET', mkey, 'unique')
      if lock and redis.call('GET', lock) == id then
        redis.call('DEL', lock)
      end
    end
    doomed[#doomed + 1] = mkey
    doomed[#doomed + 1] = base .. 'r:' .. id
  end
  del_many(doomed)
  local lims = hmget_many(KEYS[10], ids)
  for i, id in ipairs(ids) do
    if lims[i] then
      forget_limits(base, id, cjson.decode(lims[i]), now)
    end
  end
  if k == 2 then
    hdel_many(KEYS[4], ids)
  end
  hdel_many(KEYS[5], ids)
  hdel_many(KEYS[8], ids)
  hdel_many(KEYS[9], ids)
  hdel_many(KEYS[10], ids)
  zrem_many(KEYS[k], ids)
  removed = removed + #ids
end
if removed < limit then
  redis.call('DEL', KEYS[6])
end
return removed
