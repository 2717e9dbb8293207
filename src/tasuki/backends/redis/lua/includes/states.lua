-- Which listing of the console a message is in now (`core/console.BrowseState`), from
-- the ZSETs that hold it: 'ready' or 'delayed' (in `waiting` or `delayed`, due or not),
-- 'in_flight' (in `leased`, its lease not expired), 'dead'; nil for none (unknown, or
-- a lapsed lease, listed again once it is leased or settled). `K`: the queue's waiting,
-- delayed, leased and dead ZSETs.
local function state_of(K, id, now)
  local s = redis.call('ZSCORE', K.waiting, id) or redis.call('ZSCORE', K.delayed, id)
  if s then
    if tonumber(s) <= now then
      return 'ready'
    end
    return 'delayed'
  end
  s = redis.call('ZSCORE', K.leased, id)
  if s then
    if tonumber(s) > now then
      return 'in_flight'
    end
    return nil
  end
  if redis.call('ZSCORE', K.dead, id) then
    return 'dead'
  end
  return nil
end
