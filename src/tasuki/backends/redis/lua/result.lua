-- result: one message's result record (`Envelope.keep_result`), read-only.
--
-- KEYS[1]  results HASH (pending results: id -> keep_result, ms)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  message id
--
-- Returns {now µs, record, its remaining TTL (ms)} for a settled result (record: `o` +
-- the JSON value, or `f` + the JSON error), {now µs, 'p'} while it is pending, and
-- {now µs} when there is none (unknown id, result not kept, expired).

--- @include "clock"

local base, id = ARGV[1], ARGV[2]
local now = int_text(now_us())
local key = base .. 'r:' .. id
local record = redis.call('GET', key)
if record then
  return {now, record, redis.call('PTTL', key)}
end
if redis.call('HEXISTS', KEYS[1], id) == 1 then
  return {now, 'p'}
end
return {now}
