-- Workflows (`core/flowrecords.py`). A flow's keys live under the key base of its home
-- queue (the queue of its first step), so on Redis Cluster they share that queue's slot:
--   `f:<id>` HASH: `static` (the record written once, JSON), `result`, `failure`,
--     `cancelled` ('1'); expires with the flow's retention.
--   `fn:<id>` LIST: a wake-up token for `wait_flow`, pushed when the result, the first
--     failure or the cancelled flag is set (5 s).
--   `fb:<barrier>:<id>` HASH: a group's barrier, slot number -> the member's value (JSON);
--     `fv:<barrier>:<id>` STRING: its joined value, once every slot is filled.
-- Python passes every key name; the scripts never build them.
--- @include "batch"
--- @include "enqueue"
local FLOW_NOTIFY_TTL_MS = 5000

local function flow_changed(notify)
  redis.call('RPUSH', notify, '1')
  redis.call('PEXPIRE', notify, FLOW_NOTIFY_TTL_MS)
end

-- One settle's effects, from ARGV[p] (see settle.lua), if `live` (its lease was current);
-- `value` is its result (JSON). Successors are gathered into `into` / `order`
-- (`collect_sections`), for the caller to enqueue once for the whole call. Returns the
-- ARGV position after the block:
--   flow key ('' = none), notify key, ttl (ms), final ('1' / '0'), failure ('' = none),
--   number of fills, per fill: slots key, value key, slot, size;
--   number of queue sections, the sections.
local function apply_effects(p, value, live, into, order)
  local flow, notify, ttl = ARGV[p], ARGV[p + 1], ARGV[p + 2]
  local final, failed = ARGV[p + 3], ARGV[p + 4]
  local nfills = tonumber(ARGV[p + 5])
  local fills_at = p + 6
  local sections_at = fills_at + 4 * nfills
  local count = tonumber(ARGV[sections_at])
  local function skip()
    return collect_sections(sections_at + 1, count, {}, {})
  end
  if not live then
    return skip()
  end
  if flow ~= '' then
    if failed ~= '' and redis.call('EXISTS', flow) == 1
        and redis.call('HSETNX', flow, 'failure', failed) == 1 then
      flow_changed(notify)
    end
    if redis.call('HGET', flow, 'cancelled') then
      return skip()
    end
  end
  for i = 0, nfills - 1 do
    local f = fills_at + 4 * i
    local slots, joined_key, size = ARGV[f], ARGV[f + 1], tonumber(ARGV[f + 3])
    local set = redis.call('HSETNX', slots, ARGV[f + 2], value) -- first writer wins
    local filled = redis.call('HLEN', slots)
    if set == 1 and filled == 1 then
      redis.call('PEXPIRE', slots, ttl) -- it was created now
    end
    if set == 0 or filled < size then
      return skip() -- not this settle's to complete: exactly the one that does goes on
    end
    local joined = redis.call('GET', joined_key)
    if not joined then
      local names = {}
      for s = 0, size - 1 do
        names[s + 1] = tostring(s)
      end
      joined = '[' .. table.concat(hmget_many(slots, names), ',') .. ']'
      redis.call('SET', joined_key, joined, 'PX', ttl)
    end
    value = joined
  end
  local after = collect_sections(sections_at + 1, count, into, order)
  if final == '1' and flow ~= '' and redis.call('EXISTS', flow) == 1
      and redis.call('HSETNX', flow, 'result', value) == 1 then
    flow_changed(notify)
  end
  return after
end
