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
-- Every one of these keys expires once nothing can need it (per-tenant keys would
-- otherwise pile up forever), and never sooner: `lim:` of a concurrency limit SLACK_MS
-- after its latest holder's lease expiry (pushed on by every admit and keep), of a rate
-- limit `per` + SLACK_MS after its latest start, `park:` SLACK_MS after its latest parked
-- message's timer (past it, that message is due on its own and needs no wake-up).
-- Needs "signal".

local SLACK_MS = 1000

-- Whether `admit` found a concurrency key empty, by key: its first holder then sets the
-- TTL without reading it (one command, not two, for the common uncontended key).
local empty_slots = {}

-- The TTL (ms) that keeps a key until `at` (µs, server clock) + SLACK_MS.
local function ttl_until(at, now)
  return math.max(0, math.floor((at - now) / 1000)) + SLACK_MS
end

-- `key` lives until at least `at` + SLACK_MS; its TTL is never shortened, so no later
-- holder is cut short by an earlier one.
local function expire_not_before(key, at, now)
  local want = ttl_until(at, now)
  local ttl = redis.call('PTTL', key)
  if ttl == -1 or (ttl >= 0 and ttl < want) then
    redis.call('PEXPIRE', key, want)
  end
end

-- nil if every limit lets message `id` start now; else when to look at it again (µs)
-- and the concurrency limit whose freed slot should wake it (nil for a rate).
local function admit(base, id, lims, now)
  for _, l in ipairs(lims) do
    local key = base .. 'lim:' .. l[1]
    if l[2] == 'c' then
      redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
      empty_slots[key] = nil
      if not redis.call('ZSCORE', key, id) then
        local held = redis.call('ZCARD', key)
        if held >= l[3] then
          local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
          return tonumber(first[2]), l[1]
        end
        empty_slots[key] = held == 0
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
      if empty_slots[key] then
        redis.call('PEXPIRE', key, ttl_until(expiry, now))
        empty_slots[key] = nil
      else
        expire_not_before(key, expiry, now)
      end
      redis.call('ZREM', base .. 'park:' .. l[1], id)
    else
      redis.call('ZADD', key, now, id .. ':' .. fence)
      redis.call('PEXPIRE', key, math.floor(l[4] / 1000) + SLACK_MS)
    end
  end
end

-- Parked until `wake` (µs) at the latest, for a slot of limit `name`.
local function park(base, id, name, now, wake)
  local key = base .. 'park:' .. name
  redis.call('ZADD', key, 'NX', now, id)
  expire_not_before(key, wake, now)
end

-- The lease was kept: its slots live until the new expiry (a slot already dropped as
-- expired stays dropped).
local function extend_slots(base, id, lims, expiry, now)
  for _, l in ipairs(lims) do
    if l[2] == 'c' then
      local key = base .. 'lim:' .. l[1]
      if redis.call('ZADD', key, 'XX', 'CH', expiry, id) == 1 then
        expire_not_before(key, expiry, now)
      end
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

-- The lease ended (settled, cancelled, purged): each slot it still held goes to the
-- next parked message of its limit.
local function free_slots(base, id, lims, now)
  for _, l in ipairs(lims) do
    if l[2] == 'c' and redis.call('ZREM', base .. 'lim:' .. l[1], id) == 1 then
      wake_parked(base, l[1], now)
    end
  end
end

-- The message is gone (purged, cancelled): its slots go as `free_slots` says, and it
-- leaves the parked sets, so no freed slot is spent waking it.
local function forget_limits(base, id, lims, now)
  free_slots(base, id, lims, now)
  for _, l in ipairs(lims) do
    if l[2] == 'c' then
      redis.call('ZREM', base .. 'park:' .. l[1], id)
    end
  end
end
