-- dead_letter: one dead letter by id (a direct lookup, not a scan of the pages).
--
-- KEYS[1]  dead ZSET
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  message id
--
-- Returns its `dead_letter` record (includes/dead_letter_fields.lua), or an empty
-- array if the id is not dead. Read-only.

--- @include "dead_letter_fields"

local out = {}
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  push_dead_letter(out, ARGV[1], ARGV[2])
end
return out
