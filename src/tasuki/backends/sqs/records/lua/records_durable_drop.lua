-- records_durable_drop: a message is gone (acked, cancelled, purged): its step records
-- and signals go; its wait wakes it no more, and only its number and state stay (to
-- refuse its delayed copy) until an hour after it would have woken.
--
-- KEYS[1]  its step records, KEYS[2] its signals, KEYS[3] its wait

redis.call('DEL', KEYS[1], KEYS[2])
local w = redis.call('HMGET', KEYS[3], 'state', 'until')
if not w[1] then
  return 1
end
if w[1] == 'pending' or w[1] == 'waiting' then
  redis.call('HSET', KEYS[3], 'state', 'ended')
end
redis.call('HSET', KEYS[3], 'entry', '', 'handle', '')
redis.call('PEXPIREAT', KEYS[3], math.floor((tonumber(w[2]) + 3600) * 1000))
return 1
