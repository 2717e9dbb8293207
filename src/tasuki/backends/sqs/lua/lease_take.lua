-- lease_take: record each lease token as its message's current lease (one batch).
--
-- KEYS[i]    the lease record of message i (STRING, value = lease token, TTL = LEASE_TTL)
--
-- ARGV[1]    TTL of a record (ms)
-- ARGV[1+i]  the lease token of message i
--
-- A lapsed lease's record is replaced: the new lease is the current one.
-- Returns nothing.

for i, key in ipairs(KEYS) do
  redis.call('SET', key, ARGV[1 + i], 'PX', ARGV[1])
end
return 0
