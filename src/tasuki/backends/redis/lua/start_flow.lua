-- start_flow: store a flow's record and enqueue its first steps, in one atomic step.
--
-- KEYS[1]  the flow's HASH (`f:<id>`, see includes/flows.lua)
--
-- ARGV[1]  the record's static part (JSON)
-- ARGV[2]  retention (ms): the record expires then
-- ARGV[3]  priority_aging (µs)
-- ARGV[4]  number of queue sections, then the sections (includes/enqueue.lua,
--          `collect_sections`): the first steps' messages, by queue
--
-- Returns 1, or 0 (and nothing enqueued) if the flow exists.

--- @include "flows"

if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'static', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local into, order = {}, {}
collect_sections(5, tonumber(ARGV[4]), into, order)
enqueue_collected(into, order, tonumber(ARGV[3]))
return 1
