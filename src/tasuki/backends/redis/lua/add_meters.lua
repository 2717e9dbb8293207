-- add_meters: add to a queue's reliability meters (what workers measure: heartbeat lag).
--
-- KEYS[1]  counts HASH
--
-- ARGV     field, increment, field, increment ... (whole numbers)
--
-- Returns the number of fields changed.

for i = 1, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
return #ARGV / 2
