-- lock_swap: hand a held lock to a new owner with a new TTL (compare-and-set).
--
-- KEYS[1]  the lock
--
-- ARGV[1]  current owner
-- ARGV[2]  new owner
-- ARGV[3]  new TTL (ms, >= 1)
--
-- Returns 1 if swapped, 0 if `owner` no longer holds it.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
