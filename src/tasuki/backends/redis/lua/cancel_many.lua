-- cancel_many: cancel listed messages, each only if it is still in the state it was
-- listed in (the console's bulk cancel, `Backend.cancel_many`).
--
-- KEYS[1..8] as cancel.lua: waiting, leased, leases, delayed, keep, results, waiters,
--            limited
-- KEYS[9]  dead ZSET
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  the state: 'ready', 'delayed', 'in_flight' or 'dead'
-- ARGV[3]  how long a cancelled id is remembered (ms), as cancel.lua's
-- ARGV[4..] message ids
--
-- A waiting or running message is cancelled as cancel.lua does; a dead letter is
-- removed from the dead letters (its hash and finished-id window with it, as
-- purge_dead.lua does). Returns one 1 (cancelled) / 0 (not in that state) per id.

--- @include "clock"
--- @include "signal"
--- @include "limits"
--- @include "cancel"
--- @include "states"

local base, state, window = ARGV[1], ARGV[2], ARGV[3]
local K = {waiting = KEYS[1], delayed = KEYS[4], leased = KEYS[2], dead = KEYS[9]}
local now = now_us()
local out = {}
for i = 4, #ARGV do
  local id = ARGV[i]
  local done = 0
  if state_of(K, id, now) == state then
    if state == 'dead' then
      redis.call('ZREM', KEYS[9], id)
      redis.call('HDEL', KEYS[5], id)
      redis.call('DEL', base .. 'm:' .. id)
      done = 1
    elseif cancel_one(KEYS, base, id, window) ~= 'unknown' then
      done = 1
    end
  end
  out[#out + 1] = done
end
return out
