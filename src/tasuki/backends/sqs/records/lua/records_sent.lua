-- records_sent: the messages claimed for a sender (records_claim_sends.lua) were sent:
-- their id records are no longer that sender's to send again (one batch).
--
-- KEYS[i]  the id record of message i
--
-- ARGV[1]  the claim's owner ('~send~' .. the sender)
-- ARGV[2]  the owner once sent ('~sent~' .. the sender); the record keeps its TTL
--
-- Returns nothing.

for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('SET', key, ARGV[2], 'KEEPTTL')
  end
end
return 0
