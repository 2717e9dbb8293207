-- The `dead_letter` record of one dead letter, appended to `out` (a missing field as '').
--- @reply dead_letter: id body headers attempt reason error_type error_message error_traceback died_us enqueued_us max_attempts
local function push_dead_letter(out, base, id)
  local f = redis.call('HMGET', base .. 'm:' .. id, 'body', 'headers', 'attempt', 'reason',
    'error_type', 'error_message', 'error_traceback', 'died_us', 'enqueued_us', 'max_attempts')
  out[#out + 1] = id
  for i = 1, 10 do
    out[#out + 1] = f[i] or ''
  end
end
