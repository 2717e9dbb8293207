-- records_take: record each lease token as its message's current lease (one batch): the
-- lease records a backend that cannot fence its own leases keeps in this lock store
-- (`LeaseRecords`, records/base.py; SQS's).
--
-- KEYS[i]         the lease record of message i: a STRING
--                 "owner\nuntil_ms\ncopy\nreceives\nfence", TTL LEASE_TTL. `owner` is
--                 the lease token ('' once settled), `until_ms` when that lease (or the
--                 acked grace) ends, `copy` the SQS MessageId leased, `receives` the
--                 leases granted on that copy, `fence` the last lease's fencing number.
--
-- ARGV[1]         TTL of a record (ms)
-- ARGV[2+7(i-1)]  the lease token of message i
-- ARGV[3+7(i-1)]  its visibility timeout (ms)
-- ARGV[4+7(i-1)]  the SQS MessageId received
-- ARGV[5+7(i-1)]  SQS's receive count of it
-- ARGV[6+7(i-1)]  the fencing number counted from the message
-- ARGV[7+7(i-1)]  the receives to count where there is no record of this copy
-- ARGV[8+7(i-1)]  '1' if the message was sent once (`LeaseTake.once`): another copy of it
--                 met while its record says acked is a second send, refused as acked
--
-- A lapsed or settled lease's record is replaced: the new lease is the current one.
-- Refused, as a duplicate delivery not to run (and not counted): a message whose
-- lease is still live (even under the same token: one receipt handle handed to two
-- receives, which SQS never does and moto's threaded server can), and the very SQS message acked a moment ago (standard queues
-- deliver at least once). The fence granted is one more than the record's where that is
-- higher than the counted one; the receives one more than the record's for the same
-- copy, the receive count where another copy's lease was never settled (or the count
-- is unknown), else ARGV[7+6(i-1)]: the rule of `records.base.grant`.
-- A cancelled message (its record's owner starts with CANCELLED) is refused as such: not
-- to run, to be deleted; its record stays. So is the acked copy met again (ACKED_TAKE).
-- The copy of an acked step whose sends are not known to be made (UNSENT) is answered
-- as such (UNSENT_TAKE): the caller checks them (records_sends_made.lua).
-- Returns a `granted` record per message: the fence and receives granted (0 and 0:
-- refused, -1 and 0: cancelled, -2 and 0: acked, -3 and 0: unsent), and 1 if the
-- message's last lease was taken and never settled (it lapsed).
--- @reply granted: fence receives lapsed

--- @include "lease_record"

local now = now_ms()
local out = {}
for i, key in ipairs(KEYS) do
  local at = 2 + 7 * (i - 1)
  local token, vt, copy = ARGV[at], tonumber(ARGV[at + 1]), ARGV[at + 2]
  local count, fence, receives = tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4]),
    tonumber(ARGV[at + 5])
  local once = ARGV[at + 6] == '1'
  local refused, lapsed = false, 0
  local cur = redis.call('GET', key)
  if cur then
    local owner, until_ms, held, got, last = read_lease(cur)
    if cancelled(owner) then
      refused = -1
    elseif until_ms > now and owner == '' and (held == copy or once) then
      refused = -2
    elseif until_ms > now and unsent(owner) and held == copy then
      refused = -3
    elseif until_ms > now and owner ~= '' then
      refused = true
    else
      if owner ~= '' then lapsed = 1 end
      if held == copy then
        if got > 0 then receives = got + 1 else receives = count end
      elseif owner ~= '' then
        receives = count
      end
      if last + 1 > fence then fence = last + 1 end
    end
  end
  local o = 3 * (i - 1)
  if refused == -1 or refused == -2 or refused == -3 then
    out[o + 1], out[o + 2], out[o + 3] = refused, 0, 0
  elseif refused then
    out[o + 1], out[o + 2], out[o + 3] = 0, 0, 0
  else
    redis.call('SET', key, lease_text(token, now + vt, copy, receives, fence), 'PX', ARGV[1])
    out[o + 1], out[o + 2], out[o + 3] = fence, receives, lapsed
  end
end
return out
