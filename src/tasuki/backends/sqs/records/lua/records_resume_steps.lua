-- records_resume_steps: dead steps re-driven (includes/flow_records.lua): each one's
-- dead mark goes, and a flow whose first failure is that step runs again (its failure
-- is cleared), so every reader of the flow sees it resumed.
--
-- KEYS  per step: its flow's record (`N flow:<flow>` HASH), its dead mark
--       (`N dead:<queue>:<id>`)
-- ARGV  per step: its queue, its id
--
-- Returns the number of flows resumed.

local resumed = 0
for i = 1, #ARGV, 2 do
  local flow, queue, id = KEYS[i], ARGV[i], ARGV[i + 1]
  redis.call('DEL', KEYS[i + 1])
  local failure = redis.call('HGET', flow, 'failure')
  if failure then
    local doc = cjson.decode(failure)
    if doc.queue == queue and doc.message_id == id then
      redis.call('HDEL', flow, 'failure')
      resumed = resumed + 1
    end
  end
end
return resumed
