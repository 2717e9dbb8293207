-- records_steps: what the records tell of each step of a flow (`app.flow` on SQS, which
-- keeps no state of a message), read in one call.
--
-- KEYS[3i-2]  step i's dead-step record (includes/flow_records.lua)
-- KEYS[3i-1]  its lease record (see records_take.lua)
-- KEYS[3i]    its id record (see records_claim_ids.lua)
--
-- Returns per step: 1 if it is marked dead; 1 if a live lease holds it (not cancelled);
-- the leases counted on it; its id: 0 unknown, 1 live (SQS has it, delayed or not),
-- 2 finished.
--- @reply step: dead leased receives known

--- @include "lease_record"

local now = now_ms()
local out = {}
for i = 1, #KEYS / 3 do
  local dead, lease, id = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local leased, receives, known = 0, 0, 0
  local record = redis.call('GET', lease)
  if record then
    local owner, until_ms, _, got = read_lease(record)
    receives = got
    if owner ~= '' and not cancelled(owner) and until_ms > now then
      leased = 1
    end
  end
  local owner = redis.call('GET', id)
  if owner then
    known = owner == '' and 2 or 1
  end
  local o = 4 * (i - 1)
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = redis.call('EXISTS', dead), leased,
    receives, known
end
return out
