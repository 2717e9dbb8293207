-- The fields of one dead letter, appended to `out` in the order the backend parses:
-- id, body, headers, attempt, reason, error_type, error_message, error_traceback,
-- died_us, enqueued_us.
local function push_dead_letter(out, base, id)
  local f = redis.call('HMGET', base .. 'm:' .. id, 'body', 'headers', 'attempt', 'reason',
    'error_type', 'error_message', 'error_traceback', 'died_us', 'enqueued_us')
  out[#out + 1] = id
  for i = 1, 9 do
    out[#out + 1] = f[i] or ''
  end
end
