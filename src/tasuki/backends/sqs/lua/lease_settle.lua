-- lease_settle: end each lease record still holding the caller's token (one batch).
--
-- KEYS[i]  the lease record of message i ("owner\nuntil_ms\ncopy", see lease_take.lua)
--
-- ARGV[1]    0: delete the record; else the message was acked, and its record stays
--            that many ms with no owner, so a late second delivery of the same SQS
--            message is refused by lease_take
-- ARGV[1+i]  the caller's lease token for message i
--
-- Returns per message 1 if the token was current, 0 if stale.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local grace = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local token = ARGV[1 + i]
  local cur = redis.call('GET', key)
  local owner, held = nil, ''
  if cur then
    local o, _, h = string.match(cur, '^(.-)\n(%d+)\n(.*)$')
    if o then owner, held = o, h else owner = cur end
  end
  if owner == token and token ~= '' then
    if grace > 0 then
      redis.call('SET', key, '\n' .. (now + grace) .. '\n' .. held, 'PX', grace)
    else
      redis.call('DEL', key)
    end
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
