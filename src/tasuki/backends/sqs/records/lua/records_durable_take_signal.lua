-- records_durable_take_signal: consume the oldest stored signal of a name, recorded as
-- the step "tasuki:signal:<name>" of that occurrence, under the lease check.
--
-- KEYS[1]  the message's lease record
-- KEYS[2]  its step records (records_durable_step.lua)
-- KEYS[3]  its signals (LIST, oldest first, of "name\npayload")
--
-- ARGV[1]  the caller's lease token
-- ARGV[2]  the signal's name, ARGV[3] the occurrence
-- ARGV[4]  now (epoch seconds, the step's start)
-- ARGV[5]  TTL of the step records (ms)
--
-- Returns {0} if the token is stale, {1} if no such signal is stored, {1, payload}.

--- @include "lease_record"

if not held_lease(KEYS[1], ARGV[1]) then
  return {0}
end
local prefix = ARGV[2] .. '\n'
for i, item in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
  if string.sub(item, 1, #prefix) == prefix then
    local payload = string.sub(item, #prefix + 1)
    redis.call('LSET', KEYS[3], i - 1, '~taken~')
    redis.call('LREM', KEYS[3], 1, '~taken~')
    redis.call('HSET', KEYS[2], 'tasuki:signal:' .. ARGV[2] .. '\n' .. ARGV[3],
      ARGV[4] .. '\n0\n' .. payload)
    redis.call('PEXPIRE', KEYS[2], ARGV[5])
    return {1, payload}
  end
end
return {1}
