-- records_start_flow: store a new flow's record (includes/flow_records.lua).
--
-- KEYS[1]  the flow's record (`N flow:<flow>` HASH)
--
-- ARGV[1]  the record's static part (JSON)
-- ARGV[2]  retention (ms): the record expires then
--
-- Returns 1, or 0 if a flow with this id is kept.

if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'static', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
