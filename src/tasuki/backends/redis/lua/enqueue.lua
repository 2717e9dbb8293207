-- enqueue: store a batch of messages of one queue, idempotently, claiming uniqueness
-- locks in the same atomic step.
--
-- KEYS[1]   waiting ZSET
-- KEYS[2]   signal LIST
-- KEYS[3]   keep HASH (finished-id windows)
-- KEYS[4..] uniqueness lock keys (in the queue's slot), referenced by index below
--
-- ARGV[1]   queue key base, `<prefix>{<queue>}:`
-- ARGV[2]   number of messages, n
-- then, per message (10 fields each, starting at ARGV[3]):
--   +0 id          +1 body             +2 headers (JSON)   +3 delay (µs)
--   +4 max_attempts +5 own visibility timeout (µs, '' = none)  +6 keep_id (ms, 0 = none)
--   +7 lock index (0 = no unique claim, i = KEYS[3 + i])  +8 lock TTL (ms)
--   +9 replace ('1' / '0')
--
-- Returns one entry per message, in order:
--   0 enqueued, 1 duplicate (id known: stored in any state, or finished within its
--   window), {2, holder id} conflict, {3, holder id} replaced (the waiting holder got
--   this body and headers).
--
-- Message i of the batch is stamped i µs later, so equal visible times keep enqueue
-- order (ZSET ties would otherwise fall back to the order of the ids).

--- @include "clock"
--- @include "batch"
--- @include "signal"

local waiting = KEYS[1]
local base = ARGV[1]
local n = tonumber(ARGV[2])
local now = now_us()
local results, scores, keeps = {}, {}, {}
local stored = 0
local fresh = {} -- ids stored by this call: waiting, though not in the ZSET until the end

for i = 0, n - 1 do
  local a = 3 + i * 10
  local id = ARGV[a]
  local mkey = base .. 'm:' .. id
  local verdict = nil
  if redis.call('EXISTS', mkey, base .. 'done:' .. id) > 0 then
    verdict = 1
  else
    local claim = tonumber(ARGV[a + 7])
    if claim > 0 then
      local lock = KEYS[3 + claim]
      local holder = redis.call('GET', lock)
      if holder and holder ~= id then
        if ARGV[a + 9] == '1' and (fresh[holder] or redis.call('ZSCORE', waiting, holder)) then
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
    scores[#scores + 1] = now + tonumber(ARGV[a + 3]) + i
    scores[#scores + 1] = id
    stored = stored + 1
    fresh[id] = true
    results[i + 1] = 0
  end
end

zadd_many(waiting, scores)
each_chunk('HSET', KEYS[3], keeps)
signal(KEYS[2], stored)
return results
