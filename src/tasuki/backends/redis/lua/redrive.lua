-- redrive: dead letters back to `waiting`, ready now, attempts reset.
--
-- KEYS[1]  waiting ZSET
-- KEYS[2]  dead ZSET
-- KEYS[3]  signal LIST
-- KEYS[4]  results HASH (a message that keeps its result: pending again)
-- KEYS[5]  limited HASH (a message with limits is listed again)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  limit: with no ids, redrive up to this many (the oldest dead first)
-- ARGV[3..] ids to redrive; ids that are not dead letters (or repeat) are skipped
--
-- The reason, error and time of death are cleared; the fence is kept (it only grows);
-- a message of priority p ranks p x aging ahead, as at enqueue; one that keeps its
-- result has it pending again (its failed record is dropped).
-- "Redrive all" is a loop of calls from the backend, so a huge dead-letter queue never
-- blocks Redis in one script.
--
-- Returns the number of messages redriven.

--- @include "clock"
--- @include "batch"
--- @include "signal"
--- @include "redrive"

local dead = KEYS[2]
local base = ARGV[1]
local now = now_us()
local ids
if #ARGV > 2 then
  ids = {}
  local seen = {}
  for i = 3, #ARGV do
    local id = ARGV[i]
    if not seen[id] and redis.call('ZSCORE', dead, id) then
      ids[#ids + 1] = id
    end
    seen[id] = true
  end
else
  ids = redis.call('ZRANGE', dead, 0, tonumber(ARGV[2]) - 1)
end
redrive_ids(KEYS, base, ids, now)
return #ids
