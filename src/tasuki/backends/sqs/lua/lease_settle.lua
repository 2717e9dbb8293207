-- lease_settle: delete each lease record still holding the caller's token (one batch).
--
-- KEYS[i]  the lease record of message i
--
-- ARGV[i]  the caller's lease token for message i
--
-- Returns per message 1 if the token was current (record deleted), 0 if stale.

local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[i] then
    redis.call('DEL', key)
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
