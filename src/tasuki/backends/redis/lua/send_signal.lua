-- send_signal: store a signal for a message, and wake it at once if it waits for it.
--
-- KEYS[1]  waiting ZSET
-- KEYS[2]  delayed ZSET (delayed messages of priority > 0)
-- KEYS[3]  dead ZSET
-- KEYS[4]  signal LIST (wakes blocked leases)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  message id
-- ARGV[3]  signal name
-- ARGV[4]  payload (JSON)
--
-- A message held in any state but dead gets the signal appended to its `g:<name>`
-- (includes/durable.lua). If its current suspended run waits for `name` and has not
-- woken yet, it becomes ready now (at its priority's rank), its wait ends, and blocked
-- leasers are signalled: in the same step, so a signal never falls between a wait and
-- its wake-up. Returns 'delivered', or 'unknown' (no such message, or a dead letter).

--- @include "clock"
--- @include "signal"
--- @include "durable"

local base, id, name = ARGV[1], ARGV[2], ARGV[3]
local mkey = base .. 'm:' .. id
local f = redis.call('HMGET', mkey, 'max_attempts', 'wait', 'fence', 'boost_us', 'g:' .. name)
if not f[1] or redis.call('ZSCORE', KEYS[3], id) then
  return 'unknown'
end
local stored = {}
if f[5] then
  stored = cmsgpack.unpack(f[5])
end
stored[#stored + 1] = ARGV[4]
redis.call('HSET', mkey, 'g:' .. name, cmsgpack.pack(stored))
local fence, until_us, sig = current_wait(f[2], f[3])
if fence and sig == name then
  local now = now_us()
  if until_us > now then
    redis.call('HDEL', mkey, 'wait')
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZADD', KEYS[1], now - (tonumber(f[4]) or 0), id)
    signal(KEYS[4], 1)
  end
end
return 'delivered'
