-- records_job_stats: the tallies of one queue's minutes (SQS's console records on a
-- Redis lock store, redis_console.py), read in one call.
--
-- KEYS[i]    the tallies of one minute (hash: job "\n" name -> count)
--
-- Returns every field and count of every key, flat.

local out = {}
for _, key in ipairs(KEYS) do
  local all = redis.call('HGETALL', key)
  for j = 1, #all do
    out[#out + 1] = all[j]
  end
end
return out
