-- retry_many: make listed messages ready now, each only if it is still in the state it
-- was listed in (the console's retry, `Backend.retry_many`).
--
-- KEYS[1]  waiting ZSET
-- KEYS[2]  dead ZSET
-- KEYS[3]  signal LIST
-- KEYS[4]  results HASH
-- KEYS[5]  limited HASH
-- KEYS[6]  delayed ZSET (delayed messages of priority > 0)
-- KEYS[7]  leased ZSET
-- KEYS[8..] the records (`f:<flow>`) of the flows the ids are steps of (state 'dead')
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  the state: 'delayed' or 'dead' (any other changes nothing)
-- ARGV[3]  the queue's name
-- ARGV[4..] pairs: a message id, and the KEYS index of its flow's record (0: none)
--
-- delayed: a message still waiting for its time (a delay, a retry's backoff, a durable
--   sleep or wait) is made ready now at its priority's rank, attempts kept; a durable
--   wait it had ends. dead: a dead letter is re-driven as redrive.lua does (the flow
--   whose failure it is runs again). Blocked leasers are
--   signalled. Returns one 1 (changed) / 0 (not in that state, or repeated) per id.

--- @include "clock"
--- @include "batch"
--- @include "signal"
--- @include "redrive"
--- @include "states"

local base, state, queue = ARGV[1], ARGV[2], ARGV[3]
local K = {waiting = KEYS[1], delayed = KEYS[6], leased = KEYS[7], dead = KEYS[2]}
local now = now_us()
local out, seen, chosen, flows = {}, {}, {}, {}
for i = 4, #ARGV, 2 do
  local id = ARGV[i]
  local ok = not seen[id] and (state == 'delayed' or state == 'dead')
    and state_of(K, id, now) == state
  seen[id] = true
  out[#out + 1] = ok and 1 or 0
  if ok then
    chosen[#chosen + 1] = id
    flows[#chosen] = tonumber(ARGV[i + 1])
  end
end
if state == 'dead' then
  redrive_ids(KEYS, base, queue, chosen, flows, now)
elseif #chosen > 0 then
  local scores = {}
  for _, id in ipairs(chosen) do
    local mkey = base .. 'm:' .. id
    local boost = tonumber(redis.call('HGET', mkey, 'boost_us')) or 0
    redis.call('HDEL', mkey, 'wait')
    scores[#scores + 1] = now - boost
    scores[#scores + 1] = id
  end
  zrem_many(KEYS[6], chosen)
  zadd_many(KEYS[1], scores)
  signal(KEYS[3], #chosen)
end
return out
