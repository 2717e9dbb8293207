-- purge_dead: delete up to `limit` dead letters of a queue (the backend loops).
--
-- KEYS[1]  dead ZSET
-- KEYS[2]  keep HASH (finished-id windows)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  limit
--
-- Returns the number deleted; fewer than `limit` means the dead-letter queue is empty.

--- @include "batch"

local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
local doomed = {}
for i, id in ipairs(ids) do
  doomed[i] = ARGV[1] .. 'm:' .. id
end
del_many(doomed)
hdel_many(KEYS[2], ids)
zrem_many(KEYS[1], ids)
return #ids
