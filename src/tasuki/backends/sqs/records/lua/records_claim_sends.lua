-- records_claim_sends: claim the id record of each message a workflow message (or a
-- flow's start) is about to send, for that sender (one batch): taken where the id is
-- free, or where it is still this sender's claim, unsent (its send was cut short).
--
-- KEYS[i]  the id record of message i (see records_claim_ids.lua)
--
-- ARGV[1]  TTL of a record (ms)
-- ARGV[2]  the claim's owner: '~send~' .. the sender (QUEUE:ID, or flow:<id>)
--
-- Returns per message 1 if claimed for the sender, 0 if the id is another's, or sent.

local out = {}
for i, key in ipairs(KEYS) do
  local cur = redis.call('GET', key)
  if not cur or cur == ARGV[2] then
    redis.call('SET', key, ARGV[2], 'PX', ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
