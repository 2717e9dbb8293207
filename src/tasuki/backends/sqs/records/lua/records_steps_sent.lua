-- records_steps_sent: acked workflow steps sent everything they enqueue (one batch): each
-- lease record still owned by UNSENT since its settle (records_settle_steps.lua) becomes
-- a plain acked record (kept for what is left of its grace), so a copy of the message met again is deleted, not run again.
--
-- KEYS[i]  the lease record of message i (see records_take.lua)
--
-- Returns nothing.

--- @include "lease_record"

local now = now_ms()
for _, key in ipairs(KEYS) do
  local cur = redis.call('GET', key)
  if cur then
    local owner, until_ms, copy, receives, fence, progress = read_lease(cur)
    if unsent(owner) then
      redis.call('SET', key, lease_text('', until_ms, copy, receives, fence, progress),
        'PX', math.max(until_ms - now, 1))
    end
  end
end
return 0
