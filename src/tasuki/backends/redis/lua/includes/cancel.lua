-- Cancel one message of a queue (what cancel.lua does, see there): `K` is its KEYS
-- (waiting, leased, leases, delayed, keep, results, waiters, limited), `window` how
-- long the cancelled id is remembered (ms) when its keep_id window is shorter. Returns
-- 'removed', 'signalled' or 'unknown'. Needs "clock", "signal" and "limits".
local function cancel_one(K, base, id, window)
  local mkey = base .. 'm:' .. id
  local token = ''
  local status
  if redis.call('ZREM', K[1], id) == 1 or redis.call('ZREM', K[4], id) == 1 then
    status = 'removed'
  else
    local expiry = redis.call('ZSCORE', K[2], id)
    if not expiry then
      return 'unknown'
    end
    if tonumber(expiry) > now_us() then
      status = 'signalled'
      token = redis.call('HGET', K[3], id) or ''
    else
      status = 'removed'
    end
    redis.call('ZREM', K[2], id)
    redis.call('HDEL', K[3], id)
  end
  local lims = redis.call('HGET', K[8], id)
  if lims then
    forget_limits(base, id, cjson.decode(lims), now_us())
    redis.call('HDEL', K[8], id)
  end
  window = tonumber(window)
  local own = tonumber(redis.call('HGET', K[5], id))
  if own and own > window then
    window = own
  end
  redis.call('SET', base .. 'x:' .. id, token, 'PX', window)
  local lock = redis.call('HGET', mkey, 'unique')
  if lock and redis.call('GET', lock) == id then
    redis.call('DEL', lock)
  end
  redis.call('HDEL', K[5], id)
  redis.call('HDEL', K[6], id)
  if redis.call('HDEL', K[7], id) == 1 then
    -- Its waiters learn at once that no result will come.
    redis.call('RPUSH', base .. 'n:' .. id, '1')
    redis.call('PEXPIRE', base .. 'n:' .. id, 5000)
  end
  redis.call('DEL', mkey, base .. 'r:' .. id)
  return status
end
