-- Workflow records SQS keeps in a Redis lock store (`FlowRecords`,
-- redis_flows.py), beside its lease records, under the records' namespace N
-- (after the lock prefix). A single Redis server only: a step's settle touches its lease
-- record and its flow's keys in one script, which a Cluster cannot do across slots.
--   `N flow:<flow>` HASH, PX the flow's retention: `static` (the record written once,
--     JSON), `result`, `failure` (the first one), `cancelled` ('1')
--   `N fb:<barrier>:<flow>` HASH, PX the flow's retention from its first fill: `filled`
--     (slots written, counted by the fill that wrote each), `value` (the JSON array of
--     the slots, once complete), `s<n>` slot n's value, `w<n>` the message that wrote
--     it (QUEUE:ID), so that message's re-run knows the slot is its own
--   `N dead:<queue>:<id>` STRING, PX the flow's retention: the step was dead-lettered
--     (what `app.flow` shows: SQS keeps no state of a message)
-- Python passes every key name; the scripts never build them.

-- A complete barrier's slots s0 .. s<size-1>, in order, read SLOTS_PER_CALL fields per
-- HMGET: unpack() of a huge table overflows Lua's C stack (about 8000 slots).
local SLOTS_PER_CALL = 1000
local function read_slots(key, size)
  local out = {}
  for first = 0, size - 1, SLOTS_PER_CALL do
    local names = {}
    for s = first, math.min(first + SLOTS_PER_CALL, size) - 1 do
      names[#names + 1] = 's' .. s
    end
    local part = redis.call('HMGET', key, unpack(names))
    for j = 1, #part do
      out[#out + 1] = part[j]
    end
  end
  return out
end

-- One current lease's effects (`core/flowrecords.Effects`), in its settle's script, in
-- the order `Effects` gives: the dead mark, the first failure, the cancelled flag, the
-- fills (first writer wins by slot; a slot this message wrote before is its own, so its
-- re-run goes on again), the flow's result. `barriers` are the fills' keys in order;
-- ARGV from `p`: ttl (ms), failure ('' = none), final ('1' / '0'), enqueue ('1' if the
-- step enqueues any), the value of the first fill (JSON), the number of fills, then
-- per fill its slot and the barrier's size. Returns 1 if what it enqueues is to be sent.
local function apply_step(flow, dead, barriers, p, writer)
  local ttl, failure, final, enqueue = ARGV[p], ARGV[p + 1], ARGV[p + 2], ARGV[p + 3]
  local value = ARGV[p + 4]
  if failure ~= '' then
    redis.call('SET', dead, 'dead', 'PX', ttl)
    if redis.call('EXISTS', flow) == 1 then
      redis.call('HSETNX', flow, 'failure', failure)
    end
  else
    redis.call('DEL', dead) -- a re-driven step settles again
  end
  if redis.call('HGET', flow, 'cancelled') then
    return 0
  end
  for i, key in ipairs(barriers) do
    local f = p + 6 + 2 * (i - 1)
    local slot, size = ARGV[f], tonumber(ARGV[f + 1])
    if redis.call('HSETNX', key, 's' .. slot, value) == 1 then
      redis.call('HSET', key, 'w' .. slot, writer)
      if redis.call('HINCRBY', key, 'filled', 1) == 1 then
        redis.call('PEXPIRE', key, ttl) -- created by this fill
      end
    elseif redis.call('HGET', key, 'w' .. slot) ~= writer then
      return 0 -- another message's slot: that settle went on, if any did
    end
    if tonumber(redis.call('HGET', key, 'filled')) < size then
      return 0
    end
    local joined = redis.call('HGET', key, 'value')
    if not joined then
      joined = '[' .. table.concat(read_slots(key, size), ',') .. ']'
      redis.call('HSET', key, 'value', joined)
    end
    value = joined
  end
  if final == '1' and redis.call('EXISTS', flow) == 1 then
    redis.call('HSETNX', flow, 'result', value)
  end
  if enqueue == '1' then
    return 1
  end
  return 0
end
