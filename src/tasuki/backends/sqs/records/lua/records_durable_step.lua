-- records_durable_step: store one durable step record under the lease check.
--
-- KEYS[1]  the message's lease record (records_take.lua)
-- KEYS[2]  its step records (HASH, in the lease record's slot): field "name\noccurrence",
--          value "started_at\nduration\nresult"
--
-- ARGV[1]  the caller's lease token
-- ARGV[2]  the field, ARGV[3] the value
-- ARGV[4]  TTL of the step records (ms)
--
-- Returns 1 if stored, 0 if the token is stale (nothing stored).

--- @include "lease_record"

if not held_lease(KEYS[1], ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1
