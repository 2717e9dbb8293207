-- Result records (`Envelope.keep_result`). A message that keeps its result is listed in
-- the queue's `results` HASH (id -> TTL, ms) while its result is pending; settling it
-- writes `r:<id>` (`o` + the JSON value, or `f` + the JSON error) with that TTL, takes
-- it off the list and wakes whoever waits on `n:<id>` (`wait_result`, a BLMOVE of
-- the list onto itself, so every waiter wakes and the token stays until it expires).
-- Callers check the lease token first: only the current holder writes.
local NOTIFY_TTL_MS = 5000

local function store_result(base, id, value, ttl)
  redis.call('SET', base .. 'r:' .. id, value, 'PX', ttl)
  local notify = base .. 'n:' .. id
  redis.call('RPUSH', notify, '1')
  redis.call('PEXPIRE', notify, NOTIFY_TTL_MS)
end

-- The record of one message, if it keeps one; it leaves the pending list.
local function write_result(base, results, id, value)
  local ttl = redis.call('HGET', results, id)
  if ttl then
    store_result(base, id, value, ttl)
    redis.call('HDEL', results, id)
  end
end

-- The failed record of a message the lease dead-letters itself (no error, a reason code),
-- as `core/flowrecords.error_json` writes it.
local function failed_json(reason)
  return 'f{"type":"","message":"","traceback":"","reason":"' .. reason .. '"}'
end
