-- settle: end leases of one queue, each by its verdict, in one atomic step.
--
-- KEYS[1]  waiting ZSET
-- KEYS[2]  leased ZSET
-- KEYS[3]  leases HASH (id -> token of the current lease)
-- KEYS[4]  dead ZSET
-- KEYS[5]  keep HASH (finished-id windows)
-- KEYS[6]  counts HASH (`acked` and `dead` grow by the messages settled so)
-- KEYS[7]  signal LIST
-- KEYS[8]  results HASH (pending results: id -> keep_result, ms)
-- KEYS[9]  delayed ZSET (delayed messages of priority > 0)
-- KEYS[10] waiters HASH (ids someone waits on in `wait_result`)
-- KEYS[11] limited HASH (messages with rate or concurrency limits: id -> limits)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  the verdicts, one letter per item, in order: 'a' ack, 'A' ack with a result,
--          'r' release, 's' suspend (a durable run's release), 'd' dead
-- then, from ARGV[3], each item's fields, as many as its verdict takes:
--   a  id, lease token
--   A  id, lease token, the result (JSON)
--   r  id, lease token, delay (µs), refund ('1': without penalty, the attempt is given
--      back; '0': it counts), history event ("retried" / "released"), history detail
--   s  the fields of r, then the signal the run waits for ('' for a sleep)
--   d  id, lease token, reason, error type ('' = no error), error message,
--      error traceback, history detail, the failed result (`error_json`)
--
-- Only the current token settles a message: a stale one (the lease expired and the
-- message was leased again, or it was settled or purged already) changes nothing, and
-- a receipt repeated in the call settles its message once (the first time).
--
-- ack: the message is deleted. One enqueued with keep_id leaves `done:<id>` behind for
--   that long, its value the message's history with the ack appended, so a producer's
--   retry of the same id stays a no-op after the message ran and `inspect` can tell
--   its story. One that keeps its result gets its `ok` record: the result given
--   ('A'), else JSON null.
-- release: back to `waiting`, visible after the delay, at its priority's rank (a
--   delayed one of priority > 0 waits in `delayed`). The fence is left alone: it
--   only ever grows, so the next lease still gets a higher one. Blocked leasers are
--   signalled, also for delayed releases, so that they re-read when the next message
--   is due.
-- suspend: a release (always without penalty) that also stores what the run waits for,
--   `wait` in includes/durable.lua; if the signal it waits for is stored already, it is
--   released ready now instead, its wait ended at once.
-- dead: into the dead ZSET with the reason and last error; it keeps its body, headers
--   and attempt count, and drops its uniqueness lock if it still owns it. One that
--   keeps its result gets its `failed` record.
--
-- A workflow step's effects (`core/flowrecords.Effects`) follow the items, when any item
-- has some: ARGV[t] the number of blocks, ARGV[t + 1] priority_aging (µs), then per
-- block the item's number (1-based) and its effects (includes/flows.lua,
-- `apply_effects`). They apply after every verdict and result of the call, and only for
-- an item whose token was current: the first failure, then, unless the flow is
-- cancelled, the fills (HSETNX into the barrier's HASH: first writer wins; complete
-- when HLEN is its size, its value the JSON array of the slots; only the settle that
-- completes it goes on), the successors (enqueued as enqueue.lua does: idempotent by
-- id, one call per queue for the whole call) and the flow's result.
--
-- Whatever the verdict, a settled lease's concurrency slots go, each to the next message
-- parked for it (see includes/limits.lua).
--
-- Every read and delete the items share is one command for the whole call (one HMGET
-- of the tokens, one DEL, HDEL, ZREM), so a batch of acks costs what `ack` alone did.
--
-- Returns one 1 / 0 per item.

--- @include "clock"
--- @include "batch"
--- @include "signal"
--- @include "history"
--- @include "to_dead"
--- @include "results"
--- @include "limits"
--- @include "flows"
--- @include "durable"

local waiting, leased, leases, dead, keep = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local results_key = KEYS[8]
local base, verdicts = ARGV[1], ARGV[2]
local ACK, RESULT, RELEASE = string.byte('a'), string.byte('A'), string.byte('r')
local SUSPEND = string.byte('s')
local FIELDS = {[ACK] = 2, [RESULT] = 3, [RELEASE] = 6, [SUSPEND] = 7, [string.byte('d')] = 8}

-- Each item's verdict, id and where its fields start.
local n = #verdicts
local kinds = {string.byte(verdicts, 1, n)}
local ids, at = {}, {}
local tail = nil -- where the effects start, if any
if not string.find(verdicts, '[^a]') then
  for k = 1, n do
    local p = 2 * k + 1
    ids[k], at[k] = ARGV[p], p
  end
  tail = 2 * n + 3
else
  local p = 3
  for k = 1, n do
    ids[k], at[k] = ARGV[p], p
    p = p + FIELDS[kinds[k]]
  end
  tail = p
end
local current = hmget_many(leases, ids)
-- A queue none of whose messages keeps a result or has limits pays one EXISTS for both,
-- not an HMGET each.
local extras = redis.call('EXISTS', KEYS[8], KEYS[11]) > 0

local results, seen, gone, ng = {}, {}, {}, 0
local acked, doomed, acked_at, with_value, na = {}, {}, {}, {}, 0
local scores, later, died, released = {}, {}, 0, {}
local now = nil
for k = 1, n do
  local id, p = ids[k], at[k]
  if current[k] and current[k] == ARGV[p + 1] and not seen[id] then
    seen[id] = true
    ng = ng + 1
    gone[ng] = id
    local verdict = kinds[k]
    if verdict == ACK or verdict == RESULT then
      na = na + 1
      acked[na], doomed[na], acked_at[na] = id, base .. 'm:' .. id, p
      if verdict == RESULT then
        with_value[na] = true
      end
    else
      now = now or now_us()
      local mkey = base .. 'm:' .. id
      local fence = fence_of(ARGV[p + 1])
      if verdict == RELEASE or verdict == SUSPEND then
        released[id] = true
        if ARGV[p + 3] == '1' then
          redis.call('HINCRBY', mkey, 'attempt', -1)
        end
        push_history(mkey, now, ARGV[p + 4], fence, ARGV[p + 5])
        local delay = tonumber(ARGV[p + 2])
        if verdict == SUSPEND then
          local sig = ARGV[p + 6]
          if sig ~= '' and redis.call('HEXISTS', mkey, 'g:' .. sig) == 1 then
            delay = 0
            redis.call('HDEL', mkey, 'wait')
          else
            redis.call('HSET', mkey, 'wait', fence .. ' ' .. int_text(now + delay) .. ' ' .. sig)
          end
        end
        local boost = tonumber(redis.call('HGET', mkey, 'boost_us'))
        if not boost then
          scores[#scores + 1] = now + delay
          scores[#scores + 1] = id
        elseif delay > 0 then
          later[#later + 1] = now + delay
          later[#later + 1] = id
        else
          scores[#scores + 1] = now - boost
          scores[#scores + 1] = id
        end
      else
        push_history(mkey, now, 'dead', fence, ARGV[p + 6])
        to_dead(dead, mkey, id, now, ARGV[p + 2], ARGV[p + 3], ARGV[p + 4], ARGV[p + 5])
        write_result(base, results_key, KEYS[10], id, 'f' .. ARGV[p + 7])
        died = died + 1
      end
    end
    results[k] = 1
  else
    results[k] = 0
  end
end

if na > 0 then
  local windows = hmget_many(keep, acked)
  local kept = {}
  for k, id in ipairs(acked) do
    if windows[k] then
      now = now or now_us()
      local story = history_with(redis.call('HGET', doomed[k], 'hist'), now, 'acked',
        fence_of(ARGV[acked_at[k] + 1]), '')
      redis.call('SET', base .. 'done:' .. id, story, 'PX', windows[k])
      kept[#kept + 1] = id
    end
  end
  hdel_many(keep, kept)
  local ttls = {}
  if extras then
    ttls = hmget_many(results_key, acked)
  end
  local written = {}
  for k, id in ipairs(acked) do
    if ttls[k] then
      local p = acked_at[k]
      local value = 'null'
      if with_value[k] then
        value = ARGV[p + 2]
      end
      redis.call('SET', base .. 'r:' .. id, 'o' .. value, 'PX', ttls[k])
      written[#written + 1] = id
    end
  end
  if #written > 0 then
    hdel_many(results_key, written)
    wake_waiters(base, KEYS[10], written)
  end
  del_many(doomed)
  redis.call('HINCRBY', KEYS[6], 'acked', na)
end
if extras then
  local lims = hmget_many(KEYS[11], gone)
  local ended = {}
  now = now or now_us()
  for k, id in ipairs(gone) do
    if lims[k] then
      free_slots(base, id, cjson.decode(lims[k]), now)
      if not released[id] then
        ended[#ended + 1] = id
      end
    end
  end
  hdel_many(KEYS[11], ended)
end
hdel_many(leases, gone)
zrem_many(leased, gone)
if #scores + #later > 0 then
  zadd_many(waiting, scores)
  zadd_many(KEYS[9], later)
  signal(KEYS[7], (#scores + #later) / 2)
end
if died > 0 then
  redis.call('HINCRBY', KEYS[6], 'dead', died)
end
if tail and ARGV[tail] then
  local into, order = {}, {}
  local p = tail + 2
  for _ = 1, tonumber(ARGV[tail]) do
    local k = tonumber(ARGV[p])
    local value = 'null'
    if kinds[k] == RESULT then
      value = ARGV[at[k] + 2]
    end
    p = apply_effects(p + 1, value, results[k] == 1, into, order)
  end
  enqueue_collected(into, order, tonumber(ARGV[tail + 1]))
end
return results
