-- inspect: one message's state, lease and history, by id (direct lookups, no scan).
--
-- KEYS[1]  waiting ZSET
-- KEYS[2]  leased ZSET
-- KEYS[3]  dead ZSET
-- KEYS[4]  delayed ZSET (delayed messages of priority > 0)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  message id
-- ARGV[3]  '1': the message's body and headers too (`inspect_body`), after its record
--
-- Returns {now µs, where, ...}: `where` is 'waiting' (in `waiting` or `delayed`),
-- 'leased' or 'dead', followed by the time (visible time, lease expiry, death time, µs)
-- and the message's `message` record ('' for a field the hash lacks); or 'done',
-- followed by the remaining window (ms) and the history kept with the finished id; or
-- 'cancelled', followed by the remaining window (ms); or 'none'. Read-only. With
-- ARGV[3] '1', a stored message's record is followed by its body and headers (JSON).
--- @reply message: attempt max_attempts fence enqueued_us reason error_type error_message error_traceback hist priority progress

--- @include "clock"

local base, id = ARGV[1], ARGV[2]
local now = now_us()
local where, score = nil, nil
for k, name in ipairs({'waiting', 'leased', 'dead', 'waiting'}) do
  local s = redis.call('ZSCORE', KEYS[k], id)
  if s then
    where, score = name, s
    if k == 1 then
      -- Its rank: the visible time is the priority's boost later.
      local boost = tonumber(redis.call('HGET', base .. 'm:' .. id, 'boost_us')) or 0
      score = int_text(tonumber(s) + boost)
    end
    break
  end
end
if where then
  local f = redis.call('HMGET', base .. 'm:' .. id, 'attempt', 'max_attempts', 'fence',
    'enqueued_us', 'reason', 'error_type', 'error_message', 'error_traceback', 'hist',
    'priority', 'progress')
  local out = {int_text(now), where, score}
  for i = 1, 11 do
    out[#out + 1] = f[i] or ''
  end
  if ARGV[3] == '1' then
    local stored = redis.call('HMGET', base .. 'm:' .. id, 'body', 'headers')
    out[#out + 1] = stored[1] or ''
    out[#out + 1] = stored[2] or '{}'
  end
  return out
end
local done = base .. 'done:' .. id
local story = redis.call('GET', done)
if story then
  return {int_text(now), 'done', redis.call('PTTL', done), story}
end
local cancelled = base .. 'x:' .. id
if redis.call('EXISTS', cancelled) == 1 then
  return {int_text(now), 'cancelled', redis.call('PTTL', cancelled)}
end
return {int_text(now), 'none'}
