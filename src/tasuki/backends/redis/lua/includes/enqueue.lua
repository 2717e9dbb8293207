-- Store messages of one queue, idempotently, claiming uniqueness locks in the same step:
-- enqueue.lua's whole work, and what a settle does with a flow step's successors
-- (`settle.lua`) and `start_flow.lua` with a flow's first steps.
--
-- `q` names the queue's keys: q.waiting, q.signal, q.keep, q.results, q.delayed,
-- q.limited. `base` is the queue's key base, `aging` priority_aging (µs), and message i's
-- fields are the 13 from ARGV[starts[i]] (see enqueue.lua); `lock_of(field)` turns a
-- message's lock field into the lock's key (nil: no claim).
--
-- Returns one entry per message (see enqueue.lua) and how many were stored.
--- @include "clock"
--- @include "batch"
--- @include "signal"

local function enqueue_into(q, base, aging, starts, lock_of)
  local n = #starts
  local waiting = q.waiting
  local now = now_us()
  local results, scores, keeps, kept_results, later, limited = {}, {}, {}, {}, {}, {}
  local stored = 0
  local fresh = {} -- ids stored by this call: waiting, though not in the ZSET until the end

  for i = 0, n - 1 do
    local a = starts[i + 1]
    local id = ARGV[a]
    local mkey = base .. 'm:' .. id
    local verdict = nil
    if redis.call('EXISTS', mkey, base .. 'done:' .. id, base .. 'x:' .. id) > 0 then
      verdict = 1
    else
      local lock = lock_of(ARGV[a + 7])
      if lock then
        local holder = redis.call('GET', lock)
        if holder and holder ~= id then
          if ARGV[a + 9] == '1' and (fresh[holder] or redis.call('ZSCORE', waiting, holder)
              or redis.call('ZSCORE', q.delayed, holder)) then
            redis.call('HSET', base .. 'm:' .. holder, 'body', ARGV[a + 1],
              'headers', ARGV[a + 2])
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
  zadd_many(q.delayed, later)
  each_chunk('HSET', q.keep, keeps)
  each_chunk('HSET', q.results, kept_results)
  each_chunk('HSET', q.limited, limited)
  signal(q.signal, stored)
  return results, stored
end

-- A queue's keys from its base (the names `keys.py` gives them).
local function queue_keys(base)
  return {
    waiting = base .. 'waiting', signal = base .. 'signal', keep = base .. 'keep',
    results = base .. 'results', delayed = base .. 'delayed', limited = base .. 'limited',
  }
end

-- Queue sections from ARGV[p] on, until `count` are read: per queue its base, its number
-- of messages and their fields (the lock field holding the lock's full key, '' = none).
-- Each message's start is added to `into[base]` (bases in `order` as first met), so that
-- the messages of many sections go in one `enqueue_into` per queue. Returns the ARGV
-- position after them.
local function collect_sections(p, count, into, order)
  for _ = 1, count do
    local base, n = ARGV[p], tonumber(ARGV[p + 1])
    local starts = into[base]
    if not starts then
      starts = {}
      into[base] = starts
      order[#order + 1] = base
    end
    for i = 0, n - 1 do
      starts[#starts + 1] = p + 2 + 13 * i
    end
    p = p + 2 + 13 * n
  end
  return p
end

local function lock_named(field)
  if field == '' then
    return nil
  end
  return field
end

-- Enqueue what `collect_sections` gathered.
local function enqueue_collected(into, order, aging)
  for _, base in ipairs(order) do
    enqueue_into(queue_keys(base), base, aging, into[base], lock_named)
  end
end
