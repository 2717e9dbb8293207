-- records_durable_suspend: record the wait of a run that suspends, under the lease check.
--
-- KEYS[1]  the message's lease record
-- KEYS[2]  its signals (records_durable_take_signal.lua)
-- KEYS[3]  its wait (records_durable_signal.lua)
--
-- ARGV[1]  the caller's lease token
-- ARGV[2]  the signal it waits for ('' a sleep)
-- ARGV[3]  its wake-up (epoch seconds)
-- ARGV[4]  the SQS queue URL and ARGV[5] the SendMessage entry of a copy that wakes it
-- ARGV[6]  TTL of the wait at least (ms)
--
-- Returns the wait's number (one more than the last), 0 if a signal of that name is
-- stored already (nothing recorded: ready at once), -1 if the token is stale.

--- @include "lease_record"

if not held_lease(KEYS[1], ARGV[1]) then
  return -1
end
if ARGV[2] ~= '' then
  local prefix = ARGV[2] .. '\n'
  for _, item in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
    if string.sub(item, 1, #prefix) == prefix then
      return 0
    end
  end
end
local seq = redis.call('HINCRBY', KEYS[3], 'seq', 1)
redis.call('HSET', KEYS[3], 'state', 'pending', 'signal', ARGV[2], 'until', ARGV[3],
  'url', ARGV[4], 'entry', ARGV[5], 'handle', '')
local ttl = tonumber(ARGV[6])
if redis.call('PTTL', KEYS[3]) < ttl then
  redis.call('PEXPIRE', KEYS[3], ttl)
end
return seq
