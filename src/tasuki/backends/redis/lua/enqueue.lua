-- enqueue: store a batch of messages of one queue, idempotently, claiming uniqueness
-- locks in the same atomic step.
--
-- KEYS[1]   waiting ZSET
-- KEYS[2]   signal LIST
-- KEYS[3]   keep HASH (finished-id windows)
-- KEYS[4]   results HASH (pending results: id -> keep_result, ms)
-- KEYS[5]   delayed ZSET (delayed messages of priority > 0)
-- KEYS[6]   limited HASH (messages with rate or concurrency limits: id -> limits)
-- KEYS[7..] uniqueness lock keys (in the queue's slot), referenced by index below
--
-- ARGV[1]   queue key base, `<prefix>{<queue>}:`
-- ARGV[2]   number of messages, n
-- ARGV[3]   priority_aging (µs): what one level of priority is worth in waiting time
-- then, per message (13 fields each, starting at ARGV[4]):
--   +0 id          +1 body             +2 headers (JSON)   +3 delay (µs)
--   +4 max_attempts +5 own visibility timeout (µs, '' = none)  +6 keep_id (ms, 0 = none)
--   +7 lock index (0 = no unique claim, i = KEYS[6 + i])  +8 lock TTL (ms)
--   +9 replace ('1' / '0')  +10 keep_result (ms, 0 = none)  +11 priority (0 .. 9)
--   +12 limits ('' = none, else JSON: see includes/limits.lua)
--
-- Returns one entry per message, in order:
--   0 enqueued, 1 duplicate (id known: stored in any state, or finished or cancelled
--   within its window), {2, holder id} conflict, {3, holder id} replaced (the waiting holder got
--   this body and headers).
--
-- Message i of the batch is stamped i µs later, so equal visible times keep enqueue
-- order (ZSET ties would otherwise fall back to the order of the ids). A message of
-- priority p ranks p x aging ahead of its visible time; delayed, it waits in `delayed`
-- by its visible time until a lease moves it to `waiting` at its rank.

--- @include "clock"
--- @include "batch"
--- @include "signal"
--- @include "enqueue"

local function lock_at(field)
  local claim = tonumber(field)
  if claim > 0 then
    return KEYS[6 + claim]
  end
  return nil
end

local q = {
  waiting = KEYS[1], signal = KEYS[2], keep = KEYS[3], results = KEYS[4], delayed = KEYS[5],
  limited = KEYS[6],
}
local starts = {}
for i = 1, tonumber(ARGV[2]) do
  starts[i] = 4 + (i - 1) * 13
end
return (enqueue_into(q, ARGV[1], tonumber(ARGV[3]), starts, lock_at))
