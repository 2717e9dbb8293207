-- redrive: dead letters back to `waiting`, ready now, attempts reset.
--
-- KEYS[1]  waiting ZSET
-- KEYS[2]  dead ZSET
-- KEYS[3]  signal LIST
-- KEYS[4]  results HASH (a message that keeps its result: pending again)
-- KEYS[5]  limited HASH (a message with limits is listed again)
-- KEYS[6..] the records (`f:<flow>`) of the flows the ids are steps of
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  the queue's name
-- ARGV[3..] pairs: an id to redrive, and the KEYS index of its flow's record (0: none);
--          ids that are not dead letters (or repeat) are skipped
--
-- The reason, error and time of death are cleared; the fence is kept (it only grows);
-- a message of priority p ranks p x aging ahead, as at enqueue; one that keeps its
-- result has it pending again (its failed record is dropped); a flow whose first failure
-- is this message runs again (its failure is cleared), so every reader of the flow sees
-- it resumed. "Redrive all" is a loop of calls from the backend over the dead ZSET's
-- oldest ids, so a huge dead-letter queue never blocks Redis in one script.
--
-- Returns the number of messages redriven.

--- @include "clock"
--- @include "batch"
--- @include "signal"
--- @include "redrive"

local dead = KEYS[2]
local base, queue = ARGV[1], ARGV[2]
local now = now_us()
local ids = {}
local flows = {}
local seen = {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  if not seen[id] and redis.call('ZSCORE', dead, id) then
    ids[#ids + 1] = id
    flows[#ids] = tonumber(ARGV[i + 1])
  end
  seen[id] = true
end
redrive_ids(KEYS, base, queue, ids, flows, now)
return #ids
