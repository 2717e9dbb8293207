-- dead_letters: one page of a queue's dead letters, most recent first.
--
-- KEYS[1]  dead ZSET
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  offset
-- ARGV[3]  limit
--
-- Returns a `dead_letter` record per dead letter (includes/dead_letter_fields.lua).
-- Read-only.

--- @include "dead_letter_fields"

local offset, limit = tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
if limit > 0 then
  for _, id in ipairs(redis.call('ZREVRANGE', KEYS[1], offset, offset + limit - 1)) do
    push_dead_letter(out, ARGV[1], id)
  end
end
return out
