-- job_stats: a queue's per-minute job rollups summed over a range of minutes (read-only).
--
-- KEYS[1]  the queue's counts HASH (only to name the queue's slot, as add_tallies.lua)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  the first minute (epoch s, whole)
-- ARGV[3]  the last minute (epoch s, whole)
--
-- Returns a `total` record per job and count name that has one.
--- @reply total: field amount

local base = ARGV[1]
local sums, order = {}, {}
for minute = tonumber(ARGV[2]), tonumber(ARGV[3]), 60 do
  local got = redis.call('HGETALL', base .. 'js:' .. string.format('%d', minute))
  for k = 1, #got, 2 do
    local field = got[k]
    if not sums[field] then
      sums[field] = 0
      order[#order + 1] = field
    end
    sums[field] = sums[field] + tonumber(got[k + 1])
  end
end
local out = {}
for _, field in ipairs(order) do
  out[#out + 1] = field
  out[#out + 1] = sums[field]
end
return out
