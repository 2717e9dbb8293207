-- waiting: what a suspended message waits for, while it still does.
--
-- KEYS[1]  the message's HASH, `<prefix>{<queue>}:m:<id>`
--
-- The wait counts only while the lease that suspended is the message's latest (its
-- fence) and its time has not come: a later lease, a signal that woke it, or the wake-up
-- time ends it. Returns {signal, until (µs)}, or {} if the message does not wait.

--- @include "clock"
--- @include "durable"

local f = redis.call('HMGET', KEYS[1], 'wait', 'fence')
local fence, until_us, sig = current_wait(f[1], f[2])
if not fence or until_us <= now_us() then
  return {}
end
return {sig, int_text(until_us)}
