-- add_tallies: add workers' per-minute job tallies to a queue's rollups
-- (`Backend.announce`, `core/console.JobTally`).
--
-- KEYS[1]  the queue's counts HASH (only to name the queue's slot: every rollup key is
--          built from the base, under the queue's hash tag)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  how long a minute's rollup is kept after the minute (ms)
-- then per tally: the minute (epoch s, whole), the job, the number of counts n, then n
--   pairs of count name and amount
--
-- A minute's rollup is the HASH `js:<minute>`, field `<job>\n<count name>` (read back
-- split at its last newline: count names hold none) -> total, each count added with
-- HINCRBY (atomic, whatever other workers add at once); the key expires the time kept
-- after its minute, so rollups prune themselves. Returns the number of tallies added.

local base, kept = ARGV[1], tonumber(ARGV[2])
local p, added = 3, 0
while ARGV[p] do
  local minute, job, n = ARGV[p], ARGV[p + 1], tonumber(ARGV[p + 2])
  local key = base .. 'js:' .. minute
  p = p + 3
  for _ = 1, n do
    redis.call('HINCRBY', key, job .. '\n' .. ARGV[p], ARGV[p + 1])
    p = p + 2
  end
  redis.call('PEXPIREAT', key, tonumber(minute) * 1000 + kept)
  added = added + 1
end
return added
