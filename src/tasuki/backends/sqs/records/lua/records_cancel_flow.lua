-- records_cancel_flow: set a kept flow's cancelled flag (includes/flow_records.lua):
-- the settles of its steps read it and go on no further.
--
-- KEYS[1]  the flow's record (`N flow:<flow>` HASH)
--
-- Returns 1, or 0 if the flow is unknown.

if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'cancelled', '1')
return 1
