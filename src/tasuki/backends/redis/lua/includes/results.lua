-- Result records (`Envelope.keep_result`). A message that keeps its result is listed in
-- the queue's `results` HASH (id -> TTL, ms) while its result is pending; settling it
-- writes `r:<id>` (`o` + the JSON value, or `f` + the JSON error) with that TTL and
-- takes it off the list. If someone waits for it (`wait_result` put its id in the
-- `waiters` HASH, in the same script call that found it pending), the settle also
-- pushes a token onto `n:<id>`, on which the waiters block (a BLMOVE of the list onto
-- itself, so every waiter wakes and the token stays until it expires); a result nobody
-- waits for costs no wake-up. Callers check the lease token first: only the current
-- holder writes.
local NOTIFY_TTL_MS = 5000

local function wake_waiters(base, waiters, ids)
  local asked = hmget_many(waiters, ids)
  local woken = {}
  for k, id in ipairs(ids) do
    if asked[k] then
      local notify = base .. 'n:' .. id
      redis.call('RPUSH', notify, '1')
      redis.call('PEXPIRE', notify, NOTIFY_TTL_MS)
      woken[#woken + 1] = id
    end
  end
  hdel_many(waiters, woken)
end

-- The record of one message, if it keeps one; it leaves the pending list.
local function write_result(base, results, waiters, id, value)
  local ttl = redis.call('HGET', results, id)
  if ttl then
    redis.call('SET', base .. 'r:' .. id, value, 'PX', ttl)
    redis.call('HDEL', results, id)
    wake_waiters(base, waiters, {id})
  end
end

-- The failed record of a message the lease dead-letters itself (no error, a reason code),
-- as `core/flowrecords.error_json` writes it.
local function failed_json(reason)
  return 'f{"type":"","message":"","traceback":"","reason":"' .. reason .. '"}'
end
