-- Wake blocked `lease(wait=...)` calls: one token per new ready message, so a batch of n
-- wakes up to n workers (each BLPOP takes one token). Capped and trimmed so tokens
-- nobody waited for never pile up, and expiring so an abandoned queue leaves nothing.
-- A list only outlives its waiters while nobody waits, so the TTL is set when the list
-- is created (one command less on every enqueue); tokens lost to that expiry cost a
-- worker at most one `wait` of its lease call, never a message.
local SIGNAL_CAP = 64
-- Trimmed only once it is this much over the cap: with nobody waiting, every enqueue
-- would otherwise pay for an LTRIM.
local SIGNAL_SLACK = 64
local SIGNAL_TTL_MS = 60000

local function signal(key, n)
  if n <= 0 then
    return
  end
  if n > SIGNAL_CAP then
    n = SIGNAL_CAP
  end
  local tokens = {}
  for i = 1, n do
    tokens[i] = '1'
  end
  local length = redis.call('RPUSH', key, unpack(tokens))
  if length > SIGNAL_CAP + SIGNAL_SLACK then
    redis.call('LTRIM', key, -SIGNAL_CAP, -1)
  end
  if length <= n then
    redis.call('PEXPIRE', key, SIGNAL_TTL_MS)
  end
end
