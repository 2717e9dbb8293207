-- records_durable_wait: one change of a message's wait (records_durable_signal.lua).
--
-- KEYS[1]  its wait
--
-- ARGV[1]  "placed" (its sleeping copy was sent: pending -> waiting), "resent" (the new
--          copy of an answered wait was sent: answered -> resent), "unhidden" (the
--          hidden copy of an answered wait was made visible: answered -> ended), "void"
--          (the settle that was to send its copy was refused: pending -> void), or
--          "admit" (a copy that slept for wait ARGV[2] is received; ARGV[3] "1" if it
--          is due; ARGV[4] its receipt handle on a FIFO queue, '' elsewhere; ARGV[5] now)
-- ARGV[2]  the wait's number
--
-- Returns 1, or for "admit" 0 if the copy is to be deleted: its wait was answered and
-- a new copy sent, or a later wait superseded it. A due copy ends its wait. A later
-- wait no copy carries (pending, its worker gone before the re-send; or void)
-- supersedes nothing: the older copy runs, and that wait is void from then on. A copy
-- with a handle whose wait is its last, not woken and not due yet is to be hidden: its
-- handle is kept with the wait, and the wait's wake-up returned (a string).

local w = redis.call('HMGET', KEYS[1], 'seq', 'state', 'until')
if not w[1] then
  return 1
end
local cur, seq, state = tonumber(w[1]), tonumber(ARGV[2]), w[2]
if ARGV[1] == 'placed' then
  if cur == seq and state == 'pending' then
    redis.call('HSET', KEYS[1], 'state', 'waiting')
  end
  return 1
end
if ARGV[1] == 'resent' then
  if cur == seq and state == 'answered' then
    redis.call('HSET', KEYS[1], 'state', 'resent', 'entry', '')
  end
  return 1
end
if ARGV[1] == 'unhidden' then
  if cur == seq and state == 'answered' then
    redis.call('HSET', KEYS[1], 'state', 'ended', 'entry', '', 'handle', '')
  end
  return 1
end
if ARGV[1] == 'void' then
  if cur == seq and state == 'pending' then
    redis.call('HSET', KEYS[1], 'state', 'void', 'entry', '')
  end
  return 1
end
if cur < seq then
  return 1
end
if cur > seq and (state == 'pending' or state == 'void') then
  redis.call('HSET', KEYS[1], 'state', 'void', 'entry', '')
  return 1
end
if cur > seq or state == 'resent' then
  return 0
end
if ARGV[4] ~= '' and (state == 'pending' or state == 'waiting')
    and (tonumber(w[3]) or 0) > tonumber(ARGV[5]) then
  redis.call('HSET', KEYS[1], 'handle', ARGV[4])
  return w[3]
end
if ARGV[3] == '1' and (state == 'pending' or state == 'waiting') then
  redis.call('HSET', KEYS[1], 'state', 'ended', 'entry', '')
end
return 1
