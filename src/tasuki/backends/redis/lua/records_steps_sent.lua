-- records_steps_sent: acked workflow steps sent everything they enqueue (one batch): each
-- lease record still owned by UNSENT since its settle (records_settle_steps.lua) becomes
-- a plain acked record, so a copy of the message met again is deleted, not run again.
--
-- KEYS[i]  the lease record of message i (see records_take.lua)
--
-- Returns nothing.

--- @include "lease_record"

for _, key in ipairs(KEYS) do
  local cur = redis.call('GET', key)
  if cur then
    local owner, until_ms, copy, receives, fence, progress = read_lease(cur)
    if owner == UNSENT then
      redis.call('SET', key, lease_text('', until_ms, copy, receives, fence, progress),
        'KEEPTTL')
    end
  end
end
return 0
