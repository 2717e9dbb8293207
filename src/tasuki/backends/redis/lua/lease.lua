-- lease: hand out up to `max` due messages of one queue, oldest visible first.
--
-- KEYS[1]  waiting ZSET
-- KEYS[2]  leased ZSET
-- KEYS[3]  dead ZSET
-- KEYS[4]  leases HASH (id -> token of the current lease)
-- KEYS[5]  counts HASH (`dead` grows by the exhausted messages dead-lettered here; the
--          reliability meters of "meters" by lost leases and redeliveries)
-- KEYS[6]  results HASH (pending results: a message dead-lettered here gets its failed
--          record)
-- KEYS[7]  delayed ZSET (delayed messages of priority > 0, by visible time)
-- KEYS[8]  waiters HASH (ids someone waits on in `wait_result`)
-- KEYS[9]  limited HASH (messages with rate or concurrency limits: id -> limits)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  max messages
-- ARGV[3]  visibility timeout (µs) for messages enqueued without their own
-- ARGV[4]  nonce for this call's lease tokens (token = nonce '.' fence)
--
-- First the delayed messages of priority > 0 whose time came (up to PROMOTE per call)
-- move into `waiting` at their rank (visible time - priority x aging), so they take
-- their place in the order. Due = waiting with rank <= now, and leases expired by now. A due message
-- whose attempts are used up is dead-lettered instead of leased (reason code
-- `lease_expired` if it was in flight, `attempts_exhausted` if it was waiting: see
-- tasuki/core/reasons.py), and the
-- walk goes on, so exhausted messages never eat the batch. A message over one of its
-- limits is parked instead (no attempt spent: see includes/limits.lua), and the walk
-- goes on too. Each leased message gets
-- attempt + 1, fence + 1, a fresh token and expiry now + its visibility timeout. A
-- message taken from an expired lease records "lease lost" in its history, at the time
-- that lease expired, and counts in the meters (with, if leased again, the time from that
-- expiry to now); a lease of attempt 2 or more counts as a redelivery.
--
-- Returns {hint, then a `leased` record per leased message}: its id, body, headers,
-- attempt, max_attempts, enqueued_us, token, fence and own visibility timeout (µs, 0 =
-- the lease call's).
--- @reply leased: id body headers attempt max_attempts enqueued_us token fence vt_us
-- `hint`, when nothing was leased, is the µs until the next waiting or leased message
-- becomes due (-1: the queue holds none), so a blocked caller knows how long to sleep.

--- @include "clock"
--- @include "batch"
--- @include "to_dead"
--- @include "history"
--- @include "meters"
--- @include "results"
--- @include "signal"
--- @include "limits"

local PROMOTE = 1000

local waiting, leased, dead, leases = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local base = ARGV[1]
local want = tonumber(ARGV[2])
local default_vt = tonumber(ARGV[3])
local nonce = ARGV[4]
local now = now_us()
local out = {-1}
local got = 0
local redelivered = 0

local promoted = redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', now, 'WITHSCORES', 'LIMIT', 0, PROMOTE)
if #promoted > 0 then
  local ranks, ids = {}, {}
  for i = 1, #promoted, 2 do
    local id = promoted[i]
    local boost = tonumber(redis.call('HGET', base .. 'm:' .. id, 'boost_us')) or 0
    ranks[#ranks + 1] = tonumber(promoted[i + 1]) - boost
    ranks[#ranks + 1] = id
    ids[#ids + 1] = id
  end
  zrem_many(KEYS[7], ids)
  zadd_many(waiting, ranks)
end
-- Bound the work of one call when a backlog of exhausted messages waits to be dead-lettered.
local budget = want + 1000

while got < want and budget > 0 do
  local need = math.min(want - got, budget)
  local w = redis.call('ZRANGEBYSCORE', waiting, '-inf', now, 'WITHSCORES', 'LIMIT', 0, need)
  local l = redis.call('ZRANGEBYSCORE', leased, '-inf', now, 'WITHSCORES', 'LIMIT', 0, need)
  local nw, nl = #w, #l
  if nw == 0 and nl == 0 then
    break
  end
  local wi, li, from_waiting = 1, 1, 0
  local expiries, tokens, gone, parked = {}, {}, {}, {}
  for _ = 1, need do
    local id, was_waiting, expired_at
    if wi <= nw and (li > nl or tonumber(w[wi + 1]) <= tonumber(l[li + 1])) then
      id, was_waiting = w[wi], true
      wi = wi + 2
      from_waiting = from_waiting + 1
    elseif li <= nl then
      id, was_waiting, expired_at = l[li], false, tonumber(l[li + 1])
      li = li + 2
    else
      break
    end
    budget = budget - 1
    local mkey = base .. 'm:' .. id
    local f = redis.call('HMGET', mkey, 'attempt', 'max_attempts', 'vt_us', 'body', 'headers',
      'enqueued_us', 'fence', 'limits')
    local attempt = tonumber(f[1]) or 0
    local max_attempts = tonumber(f[2])
    local lost = f[4] and not was_waiting
    if lost then
      push_history(mkey, expired_at, 'lease lost', f[7] or '0', '')
      redis.call('HINCRBY', KEYS[5], 'leases_lost', 1)
    end
    if not f[4] then
      -- An index entry without its message: drop it.
      if not was_waiting then
        gone[#gone + 1] = id
      end
    elseif attempt >= max_attempts then  -- the attempt rule (core/reasons.py `exhausted`)
      local reason
      if was_waiting then
        reason = 'attempts_exhausted'
      else
        reason = 'lease_expired'
        gone[#gone + 1] = id
      end
      to_dead(dead, mkey, id, now, reason, '', '', '')
      write_result(base, KEYS[6], KEYS[8], id, failed_json(reason))
      if f[8] then
        redis.call('HDEL', KEYS[9], id)
      end
      redis.call('HINCRBY', KEYS[5], 'dead', 1)
    else
      local lims = f[8] and cjson.decode(f[8])
      local wake, slot = nil, nil
      if lims then
        wake, slot = admit(base, id, lims, now)
      end
      if wake then
        if not was_waiting then
          gone[#gone + 1] = id
        end
        parked[#parked + 1] = wake
        parked[#parked + 1] = id
        if slot then
          park(base, id, slot, now, wake)
        end
      else
        attempt = attempt + 1
        if attempt > 1 then
          redelivered = redelivered + 1
        end
        if lost then
          observe_recovery(KEYS[5], now - expired_at)
        end
        local fence = (tonumber(f[7]) or 0) + 1
        local token = nonce .. '.' .. fence
        local own_vt = tonumber(f[3])
        local expiry = now + (own_vt or default_vt)
        redis.call('HSET', mkey, 'attempt', attempt, 'fence', fence)
        if lims then
          take_limits(base, id, lims, now, expiry, fence)
        end
        expiries[#expiries + 1] = expiry
        expiries[#expiries + 1] = id
        tokens[#tokens + 1] = id
        tokens[#tokens + 1] = token
        local o = #out
        out[o + 1] = id
        out[o + 2] = f[4]
        out[o + 3] = f[5]
        out[o + 4] = attempt
        out[o + 5] = max_attempts
        out[o + 6] = f[6]
        out[o + 7] = token
        out[o + 8] = fence
        out[o + 9] = own_vt or 0
        got = got + 1
      end
    end
  end
  -- The ids taken from `waiting` are exactly its first `from_waiting` by rank.
  if from_waiting > 0 then
    redis.call('ZREMRANGEBYRANK', waiting, 0, from_waiting - 1)
  end
  zrem_many(leased, gone)
  hdel_many(leases, gone)
  zadd_many(leased, expiries)
  each_chunk('HSET', leases, tokens)
  zadd_many(KEYS[7], parked)
end

if redelivered > 0 then
  redis.call('HINCRBY', KEYS[5], 'redeliveries', redelivered)
end

if got == 0 then
  local next_due = nil
  local fw = redis.call('ZRANGE', waiting, 0, 0, 'WITHSCORES')
  local fl = redis.call('ZRANGE', leased, 0, 0, 'WITHSCORES')
  local fd = redis.call('ZRANGE', KEYS[7], 0, 0, 'WITHSCORES')
  for _, first in ipairs({fw, fl, fd}) do
    if first[2] and (not next_due or tonumber(first[2]) < next_due) then
      next_due = tonumber(first[2])
    end
  end
  if next_due then
    out[1] = math.max(0, next_due - now)
  end
end
return out
