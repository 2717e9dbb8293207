-- lock_holder: who holds a lock and for how long, read in one step.
--
-- KEYS[1]  the lock
--
-- No ARGV. Read-only.
-- Returns {owner, remaining TTL (ms; -1 = no expiry)}, or an empty array if free.

local owner = redis.call('GET', KEYS[1])
if not owner then
  return {}
end
return {owner, redis.call('PTTL', KEYS[1])}
