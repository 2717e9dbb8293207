-- steps: a message's step records (consumed signals included), oldest first.
--
-- KEYS[1]  the message's HASH, `<prefix>{<queue>}:m:<id>`
--
-- Returns a `step` record per step record (includes/durable.lua); none for an unknown
-- message.
--- @reply step: name occurrence result started duration

--- @include "batch"

local mkey = KEYS[1]
local n = tonumber(redis.call('HGET', mkey, 'sn')) or 0
local out = {}
if n == 0 then
  return out
end
local fields = {}
for k = 1, n do
  fields[k] = 's:' .. k
end
local raw = hmget_many(mkey, fields)
for k = 1, n do
  if raw[k] then
    local r = cmsgpack.unpack(raw[k])
    for j = 1, 5 do
      out[#out + 1] = r[j]
    end
  end
end
return out
