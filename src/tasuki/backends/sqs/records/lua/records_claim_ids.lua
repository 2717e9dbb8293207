-- records_claim_ids: take each message id's record of the id window unless it is held (one batch).
--
-- KEYS[i]    the id record of message i (STRING, value = a random owner)
--
-- ARGV[1]    TTL of a record (ms)
-- ARGV[1+i]  the owner for message i
--
-- Returns per message 1 if the id was free (claimed now), 0 if known (a duplicate).

local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('SET', key, ARGV[1 + i], 'NX', 'PX', ARGV[1]) then
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
