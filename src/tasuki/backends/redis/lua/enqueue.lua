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

local waiting = KEYS[1]
local base = ARGV[1]
local n = tonumber(ARGV[2])
local aging = tonumber(ARGV[3])
local now = now_us()
local results, scores, keeps, kept_results, later, limited = {}, {}, {}, {}, {}, {}
local stored = 0
local fresh = {} -- ids stored by this call: waiting, though not in the ZSET until the end

for i = 0, n - 1 do
  local a = 4 + i * 13
  local id = ARGV[a]
  local mkey = base .. 'm:' .. id
  local verdict = nil
  if redis.call('EXISTS', mkey, base .. 'done:' .. id, base .. 'x:' .. id) > 0 then
    verdict = 1
  else
    local claim = tonumber(ARGV[a + 7])
    if claim > 0 then
      local lock = KEYS[6 + claim]
      local holder = redis.call('GET', lock)
      if holder and holder ~= id then
        if ARGV[a + 9] == '1' and (fresh[holder] or redis.call('ZSCORE', waiting, holder)
            or redis.call('ZSCORE', KEYS[5], holder)) then
          redis.call('HSET', base .. 'm:' .. holder, 'body', ARGV[a + 1], 'headers', ARGV[a + 2])
          verdict = {3, holder}
        else
          verdict = {2, holder}
        end
      else
        redis.call('SET', lock, id, 'PX', ARGV[a + 8])
        redis.call('HSET', mkey, 'unique', lock)
      end
    end
  end
  if verdict then
    results[i + 1] = verdict
  else
    if ARGV[a + 5] ~= '' then
      redis.call('HSET', mkey, 'body', ARGV[a + 1], 'headers', ARGV[a + 2],
        'max_attempts', ARGV[a + 4], 'enqueued_us', now, 'vt_us', ARGV[a + 5])
    else
      redis.call('HSET', mkey, 'body', ARGV[a + 1], 'headers', ARGV[a + 2],
        'max_attempts', ARGV[a + 4], 'enqueued_us', now)
    end
    if ARGV[a + 6] ~= '0' then
      keeps[#keeps + 1] = id
      keeps[#keeps + 1] = ARGV[a + 6]
    end
    if ARGV[a + 10] ~= '0' then
      redis.call('HSET', mkey, 'result_ms', ARGV[a + 10])
      kept_results[#kept_results + 1] = id
      kept_results[#kept_results + 1] = ARGV[a + 10]
    end
    if ARGV[a + 12] ~= '' then
      redis.call('HSET', mkey, 'limits', ARGV[a + 12])
      limited[#limited + 1] = id
      limited[#limited + 1] = ARGV[a + 12]
    end
    local delay = tonumber(ARGV[a + 3])
    local priority = tonumber(ARGV[a + 11])
    if priority > 0 then
      local boost = priority * aging
      redis.call('HSET', mkey, 'priority', priority, 'boost_us', boost)
      if delay > 0 then
        later[#later + 1] = now + delay + i
        later[#later + 1] = id
      else
        scores[#scores + 1] = now + i - boost
        scores[#scores + 1] = id
      end
    else
      scores[#scores + 1] = now + delay + i
      scores[#scores + 1] = id
    end
    stored = stored + 1
    fresh[id] = true
    results[i + 1] = 0
  end
end

zadd_many(waiting, scores)
zadd_many(KEYS[5], later)
each_chunk('HSET', KEYS[3], keeps)
each_chunk('HSET', KEYS[4], kept_results)
each_chunk('HSET', KEYS[6], limited)
signal(KEYS[2], stored)
return results
