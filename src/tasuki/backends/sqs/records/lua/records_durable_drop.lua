-- records_durable_drop: a message is gone (acked, cancelled, purged): its step records
-- and signals go; its wait wakes it no more, and only its number and state stay (to
-- refuse its delayed copy) until an hour after it would have woken.
--
-- KEYS[1]  its step records, KEYS[2] its signals, KEYS[3] its wait
--
-- Returns {url, handle} of the copy a live wait keeps hidden (FIFO), to make visible
-- now; else 1.

redis.call('DEL', KEYS[1], KEYS[2])
local w = redis.call('HMGET', KEYS[3], 'state', 'until', 'url', 'handle')
if not w[1] then
  return 1
end
local hidden = 1
if w[1] == 'pending' or w[1] == 'waiting' then
  redis.call('HSET', KEYS[3], 'state', 'ended')
  if w[4] and w[4] ~= '' then
    hidden = {w[3], w[4]}
  end
end
redis.call('HSET', KEYS[3], 'entry', '', 'handle', '')
redis.call('PEXPIREAT', KEYS[3], math.floor((tonumber(w[2]) + 3600) * 1000))
return hidden
