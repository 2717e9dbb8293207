-- records_settle_steps: records_settle.lua for a batch where workflow steps settle: each
-- lease record still holding the caller's token is ended, its result record settled,
-- and a step's effects applied in the same script (includes/flow_records.lua), so they
-- happen only under the current lease.
--
-- KEYS, per message in order: its lease record (see records_take.lua), its result
--   record (includes/result_record.lua); for a step, then: its dead-step record, its
--   flow's record, and the barrier of each of its fills
--
-- ARGV[1]  how long an acked message's record stays (ms), with no owner
-- ARGV[2]  TTL of a released record (ms)
-- then per message: its lease token, '1' if acked ('0' released), its result's state
--   ('' for none), its result's value, the step's writer (QUEUE:ID; '' if it is no
--   step); for a step, then its effects (`apply_step`: ttl, failure, final, enqueue,
--   value, number of fills, per fill slot and size), then its record's owner while the
--   steps it enqueues are unsent (UNSENT and those steps)
--
-- Returns per message: 1 if the token was current (0 if stale), and 1 if the step's
-- effects say to go on (its successors are the caller's to send: an acked one's record
-- is owned by UNSENT until records_steps_sent.lua).

--- @include "lease_record"
--- @include "result_record"
--- @include "flow_records"

local now = now_ms()
local k, p = 1, 3
local out = {}
while p <= #ARGV do
  local key, result_key = KEYS[k], KEYS[k + 1]
  local token, acked, state, value, writer =
    ARGV[p], ARGV[p + 1], ARGV[p + 2], ARGV[p + 3], ARGV[p + 4]
  k, p = k + 2, p + 5
  local dead, flow, barriers, step_at, unsent_owner = nil, nil, {}, nil, ''
  if writer ~= '' then
    local nfills = tonumber(ARGV[p + 5])
    dead, flow = KEYS[k], KEYS[k + 1]
    for i = 1, nfills do
      barriers[i] = KEYS[k + 1 + i]
    end
    step_at = p
    unsent_owner = ARGV[p + 6 + 2 * nfills]
    k, p = k + 2 + nfills, p + 7 + 2 * nfills
  end
  local current, go_on = 0, 0
  local copy, receives, fence = held_lease(key, token)
  if copy then
    current = 1
    if step_at then
      go_on = apply_step(flow, dead, barriers, step_at, writer)
    end
    if acked == '1' and go_on == 1 then
      -- Kept past its grace, so that a re-run after it counts on from this lease.
      redis.call('SET', key,
        lease_text(unsent_owner, now + tonumber(ARGV[1]), copy, receives, fence), 'PX', ARGV[2])
    elseif acked == '1' then
      redis.call('SET', key, lease_text('', now + tonumber(ARGV[1]), copy, receives, fence),
        'PX', ARGV[1])
    else
      redis.call('SET', key, lease_text('', 0, copy, receives, fence), 'PX', ARGV[2])
    end
    if state ~= '' then
      settle_result(result_key, state, value, now)
    end
  end
  out[#out + 1] = current
  out[#out + 1] = go_on
end
return out
