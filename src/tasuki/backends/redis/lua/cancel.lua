-- cancel: cancel one message, whatever it is doing: a state change, not a message.
--
-- KEYS[1]  waiting ZSET
-- KEYS[2]  leased ZSET
-- KEYS[3]  leases HASH (id -> token of the current lease)
-- KEYS[4]  delayed ZSET (delayed messages of priority > 0)
-- KEYS[5]  keep HASH (finished-id windows)
-- KEYS[6]  results HASH (pending results)
-- KEYS[7]  waiters HASH (ids someone waits on in `wait_result`)
-- KEYS[8]  limited HASH (messages with rate or concurrency limits: id -> limits)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  message id
-- ARGV[3]  how long a cancelled id is remembered (ms) when its keep_id window is shorter
--
-- A waiting message (ready or delayed, or left by an expired lease) is removed. A message
-- in flight loses its lease: the token leaves `leases`, so nothing from that run settles
-- or extends, and the message is gone, so it is never leased again. Either way the
-- message, its pending result and its uniqueness lock (if it still owns it) go, and
-- `x:<id>` remembers the id for the window, holding the token of the lease that was
-- fenced out ('' if none): enqueue treats the id as known, `inspect` says cancelled,
-- and `keep` answers "cancelled" to that token. The concurrency slots the lease held go
-- to the next parked messages at once; a parked message leaves its parked sets.
--
-- Returns 'removed', 'signalled' or 'unknown' (no such message: never enqueued,
-- finished, dead, or cancelled already).

--- @include "clock"
--- @include "signal"
--- @include "limits"

local base, id = ARGV[1], ARGV[2]
local mkey = base .. 'm:' .. id
local token = ''
local status
if redis.call('ZREM', KEYS[1], id) == 1 or redis.call('ZREM', KEYS[4], id) == 1 then
  status = 'removed'
else
  local expiry = redis.call('ZSCORE', KEYS[2], id)
  if not expiry then
    return 'unknown'
  end
  if tonumber(expiry) > now_us() then
    status = 'signalled'
    token = redis.call('HGET', KEYS[3], id) or ''
  else
    status = 'removed'
  end
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
end
local lims = redis.call('HGET', KEYS[8], id)
if lims then
  forget_limits(base, id, cjson.decode(lims), now_us())
  redis.call('HDEL', KEYS[8], id)
end
local window = tonumber(ARGV[3])
local own = tonumber(redis.call('HGET', KEYS[5], id))
if own and own > window then
  window = own
end
redis.call('SET', base .. 'x:' .. id, token, 'PX', window)
local lock = redis.call('HGET', mkey, 'unique')
if lock and redis.call('GET', lock) == id then
  redis.call('DEL', lock)
end
redis.call('HDEL', KEYS[5], id)
redis.call('HDEL', KEYS[6], id)
if redis.call('HDEL', KEYS[7], id) == 1 then
  -- Its waiters learn at once that no result will come.
  redis.call('RPUSH', base .. 'n:' .. id, '1')
  redis.call('PEXPIRE', base .. 'n:' .. id, 5000)
end
redis.call('DEL', mkey, base .. 'r:' .. id)
return status
