-- cancel_flow: set a flow's cancelled flag; settles of its steps then fill and enqueue
-- nothing (includes/flows.lua). Waiters in `wait_flow` are woken.
--
-- KEYS[1]  the flow's HASH
-- KEYS[2]  its notify LIST
--
-- Returns 1, or 0 if the flow is unknown.

--- @include "flows"

if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'cancelled', '1')
flow_changed(KEYS[2])
return 1
