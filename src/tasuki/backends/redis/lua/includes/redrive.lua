-- Dead letters back to `waiting`, ready now (at their priority's rank), attempts reset:
-- what redrive.lua and retry_many.lua do to each (see redrive.lua). `K`: the queue's
-- waiting ZSET, dead ZSET, signal LIST, results HASH and limited HASH; `ids` are dead
-- letters, each once. Needs "batch" and "signal".
local function redrive_ids(K, base, ids, now)
  local scores = {}
  for i, id in ipairs(ids) do
    local mkey = base .. 'm:' .. id
    redis.call('HDEL', mkey, 'reason', 'died_us', 'error_type', 'error_message', 'error_traceback')
    redis.call('HSET', mkey, 'attempt', 0)
    local f = redis.call('HMGET', mkey, 'boost_us', 'result_ms', 'limits')
    if f[2] then
      redis.call('HSET', K[4], id, f[2])
      redis.call('DEL', base .. 'r:' .. id)
    end
    if f[3] then
      redis.call('HSET', K[5], id, f[3])
    end
    scores[#scores + 1] = now + i - 1 - (tonumber(f[1]) or 0)
    scores[#scores + 1] = id
  end
  zrem_many(K[2], ids)
  zadd_many(K[1], scores)
  signal(K[3], #ids)
end
