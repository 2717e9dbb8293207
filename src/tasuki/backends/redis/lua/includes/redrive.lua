-- Dead letters back to `waiting`, ready now (at their priority's rank), attempts reset:
-- what redrive.lua and retry_many.lua do to each (see redrive.lua). `K`: the queue's
-- waiting ZSET, dead ZSET, signal LIST, results HASH and limited HASH, then the records
-- of flows; `ids` are dead letters of the queue named `queue`, each once, and
-- `flows[i]` the K index of the record of the flow ids[i] is a step of (0: none).
-- Needs "batch" and "signal".

-- The flow's failure names this step: the flow runs again.
local function resume_flow(flow, queue, id)
  local failure = redis.call('HGET', flow, 'failure')
  if failure then
    local doc = cjson.decode(failure)
    if doc.queue == queue and doc.message_id == id then
      redis.call('HDEL', flow, 'failure')
    end
  end
end

local function redrive_ids(K, base, queue, ids, flows, now)
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
    if flows[i] > 0 then
      resume_flow(K[flows[i]], queue, id)
    end
    scores[#scores + 1] = now + i - 1 - (tonumber(f[1]) or 0)
    scores[#scores + 1] = id
  end
  zrem_many(K[2], ids)
  zadd_many(K[1], scores)
  signal(K[3], #ids)
end
