-- take_signal: consume the oldest stored signal of a name, under the current lease,
-- recording it as the step `tasuki:signal:<name>` in the same step: consumed once.
--
-- KEYS[1]  leases HASH (id -> token of the current lease)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  message id
-- ARGV[3]  lease token
-- ARGV[4]  signal name
-- ARGV[5]  the step's occurrence
-- ARGV[6]  now (epoch s, text), the record's start
--
-- Returns {0} if the token is stale (nothing changed), {1} if no such signal is stored,
-- {1, payload} for the signal consumed.

--- @include "durable"

local id, name = ARGV[2], ARGV[4]
local mkey = ARGV[1] .. 'm:' .. id
if redis.call('HGET', KEYS[1], id) ~= ARGV[3] then
  return {0}
end
local field = 'g:' .. name
local raw = redis.call('HGET', mkey, field)
if not raw then
  return {1}
end
local stored = cmsgpack.unpack(raw)
local payload = table.remove(stored, 1)
if #stored == 0 then
  redis.call('HDEL', mkey, field)
else
  redis.call('HSET', mkey, field, cmsgpack.pack(stored))
end
add_step(mkey, 'tasuki:signal:' .. name, ARGV[5], payload, ARGV[6], '0')
return {1, payload}
