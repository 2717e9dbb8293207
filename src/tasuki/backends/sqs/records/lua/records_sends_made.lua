-- records_sends_made: the copy of an acked workflow step met again while its lease record
-- is UNSENT (records_take.lua answered -3): if every step it enqueues was sent, by it
-- (its claim says sent) or before it (another owner), the record becomes a plain acked
-- one, as records_steps_sent.lua makes it, and the copy is to be deleted.
--
-- KEYS[1]  the lease record of the step (see records_take.lua)
-- KEYS[i]  from 2, the id record of each step it enqueues, as its owner lists them
--
-- ARGV[1]  the owner read (UNSENT and those steps): anything else now is answered as is
-- ARGV[2]  the step's claim not yet sent ('~send~' .. QUEUE:ID)
--
-- Returns 1 if the sends were made (the copy is to be deleted), 0 if not (refused).

--- @include "lease_record"

local cur = redis.call('GET', KEYS[1])
if not cur then
  return 0
end
local owner, until_ms, copy, receives, fence, progress = read_lease(cur)
if owner ~= ARGV[1] then
  if owner == '' then return 1 end  -- said sent meanwhile: an acked record
  return 0
end
for i = 2, #KEYS do
  local id_owner = redis.call('GET', KEYS[i])
  if not id_owner or id_owner == ARGV[2] then
    return 0  -- never claimed, or claimed and perhaps not sent
  end
end
redis.call('SET', KEYS[1], lease_text('', until_ms, copy, receives, fence, progress), 'PX',
  math.max(until_ms - now_ms(), 1))
return 1
