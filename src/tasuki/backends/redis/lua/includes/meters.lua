-- The queue's reliability meters, fields of its `counts` hash (`tasuki.core.reliability`):
-- `leases_lost`, `redeliveries`, and the expiry-to-start histogram: `recovery_us` (sum,
-- µs) and `recovery_b<i>` (observations of at most RECOVERY_BOUNDS_US[i + 1] µs; the
-- last bucket holds those above every bound). Written only when a lease is found lost or
-- a message redelivered, so a plain lease pays nothing. Needs "clock" (int_text).
local RECOVERY_BOUNDS_US = {50000, 100000, 250000, 500000, 1000000, 2500000, 5000000,
  10000000, 30000000, 60000000, 300000000}

local function observe_recovery(counts, us)
  if us < 0 then
    us = 0
  end
  local bucket = #RECOVERY_BOUNDS_US
  for i, bound in ipairs(RECOVERY_BOUNDS_US) do
    if us <= bound then
      bucket = i - 1
      break
    end
  end
  redis.call('HINCRBY', counts, 'recovery_us', int_text(us))
  redis.call('HINCRBY', counts, 'recovery_b' .. bucket, 1)
end
