-- result: one message's result record (`Envelope.keep_result`), read-only.
--
-- KEYS[1]  results HASH (pending results: id -> keep_result, ms)
-- KEYS[2]  waiters HASH (ids someone waits on)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  message id
-- ARGV[3]  '1': the caller will wait; a pending result puts the id in `waiters`, so
--          the settle that writes it wakes the caller (no wake-up is lost between
--          this read and the caller's block: both happen in this one call)
--
-- Returns {now µs, record, its remaining TTL (ms)} for a settled result (record: `o` +
-- the JSON value, or `f` + the JSON error), {now µs, 'p'} while it is pending, and
-- {now µs} when there is none (unknown id, result not kept, expired). Read-only but
-- for the waiter's mark.

--- @include "clock"

local base, id = ARGV[1], ARGV[2]
local now = int_text(now_us())
local key = base .. 'r:' .. id
local record = redis.call('GET', key)
if record then
  return {now, record, redis.call('PTTL', key)}
end
if redis.call('HEXISTS', KEYS[1], id) == 1 then
  if ARGV[3] == '1' then
    redis.call('HSET', KEYS[2], id, '1')
  end
  return {now, 'p'}
end
return {now}
