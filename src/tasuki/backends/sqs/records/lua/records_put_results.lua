-- records_put_results: write result records (one batch; `records.base.ResultPut`).
--
-- KEYS[i]      the lease record of message i (unused: it names the slot)
-- KEYS[n+i]    its result record (see includes/result_record.lua), n = #KEYS / 2
--
-- ARGV[1]      TTL of a pending record (ms): as long as SQS keeps a message
-- ARGV[3i-1]   the state: 'pending' makes a record (with keep) or makes one pending
--              again (without); 'ok' / 'failed' settle one
-- ARGV[3i]     the value (JSON; '' for pending)
-- ARGV[3i+1]   the message's keep_result (ms), or '' (keep the record's)
--
-- Where no record exists, only a pending one with keep is made. Returns nothing.

--- @include "result_record"

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = #KEYS / 2
for i = 1, n do
  local key = KEYS[n + i]
  local state, value, keep = ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
  if state ~= 'pending' then
    settle_result(key, state, value, now)
  elseif keep ~= '' then
    redis.call('SET', key, 'pending\n' .. keep .. '\n0\n', 'PX', ARGV[1])
  else
    local cur = redis.call('GET', key)
    local kept = cur and string.match(cur, '^[^\n]*\n(%d+)\n')
    if kept then
      redis.call('SET', key, 'pending\n' .. kept .. '\n0\n', 'PX', ARGV[1])
    end
  end
end
return 0
