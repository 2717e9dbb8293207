-- records_listing_drop: drop listed entries of one queue in one state, or move on the
-- time of in-flight ones whose lease was renewed (see records_listing_put.lua).
--
-- KEYS[1]         the queue's listing tag
--
-- ARGV[1]         the state: 'in_flight' or 'dead'
-- ARGV[2]         '' to drop; else the new time (epoch seconds) of renewed entries
-- ARGV[3]         with a new time: the entries' TTL from now (ms)
-- ARGV[4+2(i-1)]  entry i's id
-- ARGV[5+2(i-1)]  the lease token that put it ('' to drop whatever entry it has); an
--                 entry another lease put is left as it is
--
-- Returns nothing.

local tag, state, moved = KEYS[1], ARGV[1], ARGV[2]
local set = tag .. ':' .. state
for at = 4, #ARGV, 2 do
  local id, token = ARGV[at], ARGV[at + 1]
  local entry = set .. ':e:' .. id
  local held = redis.call('HMGET', entry, 'job', 'token')
  local job, owner = held[1], held[2]
  if job and (token == '' or owner == token) then
    if moved == '' then
      redis.call('DEL', entry)
      redis.call('ZREM', set, id)
      redis.call('ZREM', set .. ':job:' .. job, id)
    else
      redis.call('HSET', entry, 'at', moved)
      redis.call('PEXPIRE', entry, ARGV[3])
      redis.call('ZADD', set, 'XX', moved, id)
      redis.call('ZADD', set .. ':job:' .. job, 'XX', moved, id)
    end
  elseif not job and moved == '' then
    redis.call('ZREM', set, id)
  end
end
return 0
