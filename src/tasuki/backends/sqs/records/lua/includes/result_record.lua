-- A result record (SQS's, in the lock store): "state\nkeep_ms\nexpires_ms\nvalue", in
-- its lease record's slot. `state` is pending, ok or failed; `keep_ms` the message's
-- keep_result; `expires_ms` when a settled record goes (0 while pending).

-- Settle the result record at `key` if there is one: `state` and `value`, kept its
-- keep_result from `now`.
local function settle_result(key, state, value, now)
  local cur = redis.call('GET', key)
  if not cur then
    return
  end
  local keep = tonumber(string.match(cur, '^[^\n]*\n(%d+)\n'))
  if not keep then
    return
  end
  redis.call('SET', key, state .. '\n' .. keep .. '\n' .. string.format('%.0f', now + keep)
    .. '\n' .. value, 'PX', math.max(1, keep))
end
