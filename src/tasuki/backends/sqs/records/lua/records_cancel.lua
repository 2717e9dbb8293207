-- records_cancel: mark a message's lease record cancelled (its id record, checked
-- before by the caller, is another key: on a Redis Cluster another slot).
--
-- KEYS[1]  the lease record of the message (see records_take.lua)
-- KEYS[2]  its result record (see records_put_results.lua): a cancelled message keeps none
--
-- ARGV[1]  TTL of the cancelled record (ms): as long as the message's id is known
-- ARGV[2]  optional: the token of the lease expected to hold the message (the one its
--          in-flight listing showed); the message is cancelled only if that lease is
--          live and current, else 0 and nothing changes (settled, lapsed, another's)
--
-- A lease live now is fenced out: the owner becomes CANCELLED .. its token, so its
-- settle and renewal are refused and records_keep answers 2 (cancelled). Otherwise the
-- owner becomes CANCELLED: records_take refuses any copy received later.
-- Returns 2 (signalled: a lease held it), 1 (removed), 0 (already cancelled, or acked a
-- moment ago, its sends made or not: nothing to cancel).

--- @include "lease_record"

local now = now_ms()
local key = KEYS[1]
local cur = redis.call('GET', key)
local owner, until_ms, copy, receives, fence = '', 0, '', 0, 0
if cur then
  owner, until_ms, copy, receives, fence = read_lease(cur)
end
if ARGV[2] and (owner ~= ARGV[2] or until_ms <= now) then
  return 0
end
if cur then
  if cancelled(owner) or ((owner == '' or unsent(owner)) and until_ms > now) then
    return 0
  end
end
redis.call('DEL', KEYS[2])
if owner ~= '' and until_ms > now then
  redis.call('SET', key, lease_text(CANCELLED .. owner, until_ms, copy, receives, fence), 'PX',
    ARGV[1])
  return 2
end
redis.call('SET', key, lease_text(CANCELLED, 0, copy, receives, fence), 'PX', ARGV[1])
return 1
