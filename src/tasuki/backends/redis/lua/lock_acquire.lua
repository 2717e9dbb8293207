-- lock_acquire: take a lock that is free or lapsed; re-taking one's own refreshes it.
--
-- KEYS[1]  the lock, `<prefix>lock:<key>` (STRING, value = owner, TTL = the lock's)
--
-- ARGV[1]  owner
-- ARGV[2]  TTL (ms, >= 1)
--
-- A lapsed lock is simply an expired key, so "free or lapsed" is "absent".
-- Returns 1 if the caller holds the lock now, else 0.

local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
