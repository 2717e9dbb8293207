-- records_durable_signal: store a signal for a live message (its id record was read
-- first: another slot on a Cluster) and answer the wait it wakes, in one step.
--
-- KEYS[1]  the message's signals (records_durable_take_signal.lua)
-- KEYS[2]  its wait (HASH: seq, state, signal, until, url, entry, handle; steps.py)
--
-- ARGV[1]  the signal's name, ARGV[2] its payload
-- ARGV[3]  TTL of the signals (ms)
-- ARGV[4]  now (epoch seconds): a wait whose time has come is not answered, since its
--          delayed copy is visible (SQS rounds delays up) and may be being received
--
-- Returns {1} if stored, {1, seq, url, entry, handle} if it answered the wait (a new
-- copy to send from `entry` to `url`, or on a FIFO queue the hidden copy of receipt
-- handle `handle` to make visible, if not '').

redis.call('RPUSH', KEYS[1], ARGV[1] .. '\n' .. ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local w = redis.call('HMGET', KEYS[2], 'seq', 'state', 'signal', 'url', 'entry', 'until',
  'handle')
if not w[1] or (w[2] ~= 'pending' and w[2] ~= 'waiting') or w[3] ~= ARGV[1]
    or not w[5] or w[5] == '' or (tonumber(w[6]) or math.huge) <= tonumber(ARGV[4]) then
  return {1}
end
redis.call('HSET', KEYS[2], 'state', 'answered')
return {1, w[1], w[4], w[5], w[7] or ''}
