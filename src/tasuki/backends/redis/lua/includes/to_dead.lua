-- A message dies: into the dead ZSET with its reason and last error. The caller has
-- already taken its id out of `waiting` / `leased` (and `leases`). A dead message gives
-- up the uniqueness lock it claimed (only if it still owns it), so the same job can be
-- enqueued again.
local function to_dead(dead_key, mkey, id, now, reason, etype, emessage, etraceback)
  redis.call('ZADD', dead_key, now, id)
  if etype ~= '' then
    redis.call('HSET', mkey, 'reason', reason, 'died_us', now, 'error_type', etype,
      'error_message', emessage, 'error_traceback', etraceback)
  else
    redis.call('HDEL', mkey, 'error_type', 'error_message', 'error_traceback')
    redis.call('HSET', mkey, 'reason', reason, 'died_us', now)
  end
  local lock = redis.call('HGET', mkey, 'unique')
  if lock and redis.call('GET', lock) == id then
    redis.call('DEL', lock)
  end
end
