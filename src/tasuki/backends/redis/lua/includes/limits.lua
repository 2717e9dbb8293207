-- Rate and concurrency limits, admitted at lease time (`Envelope.limits`). A message's
-- limits are JSON [[name, 'c' | 'r', limit, per µs], ...], in its hash (`limits`) and in
-- the queue's `limited` HASH (id -> the same, for the settles and keeps of a batch). A
-- limit's key names its queue, so its state lives beside the queue, in its slot:
--   `B lim:<name>`  concurrency: ZSET id -> lease expiry, the leases holding a slot
--                   rate: ZSET `<id>:<fence>` -> start time, the starts of the window
--   `B park:<name>` ZSET id -> when first parked: messages waiting for a slot of it
-- A concurrency slot belongs to the lease: it ends with the lease's expiry (an expired
-- holder is dropped before anyone is admitted), and only the current token's settle,
-- keep or a cancel frees or extends it. A message over a limit is parked in `delayed`,
-- costing no attempt, until its next token is due or the earliest holder's lease
-- expires; a freed slot wakes the oldest parked message of its key at once.
-- Needs "signal".

-- nil if every limit lets message `id` start now; else when to look at it again (µs)
-- and the concurrency limit whose freed slot should wake it (nil for a rate).
local function admit(base, id, lims, now)
  for _, l in ipairs(lims) do
    local key = base .. 'lim:' .. l[1]
    if l[2] == 'c' then
      redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
      if not redis.call('ZSCORE', key, id) and redis.call('ZCARD', key) >= l[3] then
        local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
        return tonumber(first[2]), l[1]
      end
    else
      redis.call('ZREMRANGEBYSCORE', key, '-inf', now - l[4])
      if redis.call('ZCARD', key) >= l[3] then
        local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
        return tonumber(first[2]) + l[4], nil
      end
    end
  end
  return nil
end

-- Admitted and leased: it holds its slots until `expiry` and spent its tokens, and waits
-- for no slot any more.
local function take_limits(base, id, lims, now, expiry, fence)
  for _, l in ipairs(lims) do
    local key = base .. 'lim:' .. l[1]
    if l[2] == 'c' then
      redis.call('ZADD', key, expiry, id)
      redis.call('ZREM', base .. 'park:' .. l[1], id)
    else
      redis.call('ZADD', key, now, id .. ':' .. fence)
      redis.call('PEXPIRE', key, math.floor(l[4] / 1000) + 1000)
    end
  end
end

local function park(base, id, name, now)
  redis.call('ZADD', base .. 'park:' .. name, 'NX', now, id)
end

-- The lease was kept: its slots live until the new expiry.
local function extend_slots(base, id, lims, expiry)
  for _, l in ipairs(lims) do
    if l[2] == 'c' then
      redis.call('ZADD', base .. 'lim:' .. l[1], 'XX', expiry, id)
    end
  end
end

-- The oldest parked message of a limit still waiting for its time becomes due now.
local function wake_parked(base, name, now)
  local parked = base .. 'park:' .. name
  local delayed = base .. 'delayed'
  while true do
    local head = redis.call('ZPOPMIN', parked)
    if not head[1] then
      return
    end
    local at = redis.call('ZSCORE', delayed, head[1])
    if at and tonumber(at) > now then
      redis.call('ZADD', delayed, now, head[1])
      signal(base .. 'signal', 1)
      return
    end
  end
end

-- The lease ended (settled, cancelled): each slot it still held goes to the next
-- parked message of its limit.
local function free_slots(base, id, lims, now)
  for _, l in ipairs(lims) do
    if l[2] == 'c' and redis.call('ZREM', base .. 'lim:' .. l[1], id) == 1 then
      wake_parked(base, l[1], now)
    end
  end
end
