-- lock_renew: extend locks still held by `owner`.
--
-- KEYS[1..] the locks (all in one Cluster slot; the backend groups them)
--
-- ARGV[1]  owner
-- ARGV[2]  new TTL (ms, >= 1)
--
-- Returns one 1 / 0 per key: 0 where the lock lapsed or another owner holds it.

local results = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
    results[i] = 1
  else
    results[i] = 0
  end
end
return results
