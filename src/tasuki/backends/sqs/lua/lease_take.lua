-- lease_take: record each lease token as its message's current lease (one batch).
--
-- KEYS[i]         the lease record of message i: a STRING "owner\nuntil_ms\ncopy", TTL
--                 LEASE_TTL. `owner` is the lease token ('' once acked), `until_ms` when
--                 that lease (or the acked grace) ends, `copy` the SQS MessageId leased.
--
-- ARGV[1]         TTL of a record (ms)
-- ARGV[2+3(i-1)]  the lease token of message i
-- ARGV[3+3(i-1)]  its visibility timeout (ms)
-- ARGV[4+3(i-1)]  the SQS MessageId received
--
-- A lapsed lease's record is replaced: the new lease is the current one. Refused (0),
-- as a duplicate delivery not to run: a message whose other lease is still live, and
-- the very SQS message acked a moment ago (standard queues deliver at least once).
-- A record written before this format (a bare token) is simply replaced.
-- Returns per message 1 (recorded) or 0 (refused).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i, key in ipairs(KEYS) do
  local at = 2 + 3 * (i - 1)
  local token, vt, copy = ARGV[at], tonumber(ARGV[at + 1]), ARGV[at + 2]
  local refused = false
  local cur = redis.call('GET', key)
  if cur then
    local owner, until_ms, held = string.match(cur, '^(.-)\n(%d+)\n(.*)$')
    if owner and tonumber(until_ms) > now and owner ~= token
        and (owner ~= '' or held == copy) then
      refused = true
    end
  end
  if refused then
    out[i] = 0
  else
    redis.call('SET', key, token .. '\n' .. (now + vt) .. '\n' .. copy, 'PX', ARGV[1])
    out[i] = 1
  end
end
return out
