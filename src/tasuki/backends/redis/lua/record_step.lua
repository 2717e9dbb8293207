-- record_step: store one step record of a message, under its current lease only.
--
-- KEYS[1]  leases HASH (id -> token of the current lease)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  message id
-- ARGV[3]  lease token
-- ARGV[4..8] the record: name, occurrence, result (JSON), started (epoch s), duration (s)
--
-- A stale token (a zombie's: its lease expired and the message was leased again, or it
-- was settled, cancelled or purged) stores nothing. Returns 1 stored, 0 refused.

--- @include "durable"

local mkey = ARGV[1] .. 'm:' .. ARGV[2]
if redis.call('HGET', KEYS[1], ARGV[2]) ~= ARGV[3] then
  return 0
end
add_step(mkey, ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8])
return 1
