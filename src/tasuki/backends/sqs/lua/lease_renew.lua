-- lease_renew: give each lease record still holding the caller's token a new TTL.
--
-- KEYS[i]    the lease record of message i
--
-- ARGV[1]    TTL of a record (ms)
-- ARGV[1+i]  the caller's lease token for message i
--
-- Returns per message 1 if the token was current (renewed), 0 if stale.

local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1 + i] then
    redis.call('PEXPIRE', key, ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
