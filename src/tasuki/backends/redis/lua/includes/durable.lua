-- Durable steps (DESIGN §4c), kept in the message's own hash, so that whatever deletes
-- the message (ack, cancel, purge, dead-letter purge) drops them in the same DEL and a
-- redrive keeps them: the ack path pays nothing for them.
--
--   `sn`          how many step records the message holds
--   `s:<n>`       step record n (from 1), cmsgpack {name, occurrence, result JSON,
--                 started (epoch s, text), duration (s, text)}
--   `g:<name>`    the signals `name` stored and not consumed, cmsgpack {payload, ...},
--                 oldest first
--   `wait`        `<fence> <until µs> <signal>`: what the run of lease `fence` suspended
--                 for ('' signal: a sleep); meaningful only while `fence` is the
--                 message's (a later lease ends the wait without touching it)

local function add_step(mkey, name, occurrence, result, started, duration)
  local n = redis.call('HINCRBY', mkey, 'sn', 1)
  redis.call('HSET', mkey, 's:' .. n, cmsgpack.pack({name, occurrence, result, started, duration}))
end

-- The wait the message's current fence suspended for: fence, until (µs), signal; or nil.
local function current_wait(raw, fence)
  if not raw then
    return nil
  end
  local f, until_us, sig = string.match(raw, '^(%d+) (%d+) (.*)$')
  if f ~= (fence or '0') then
    return nil
  end
  return f, tonumber(until_us), sig
end
