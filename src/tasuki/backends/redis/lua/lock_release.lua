-- lock_release: delete a lock only if `owner` still holds it (compare-and-delete).
--
-- KEYS[1]  the lock
--
-- ARGV[1]  owner
--
-- Returns 1 if deleted, 0 if lapsed or held by someone else (who keeps it).

if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
