-- ack: delete finished messages, if their lease is still the caller's.
--
-- KEYS[1]  leased ZSET
-- KEYS[2]  leases HASH (id -> token of the current lease)
-- KEYS[3]  keep HASH (finished-id windows)
-- KEYS[4]  counts HASH (`acked` grows by the messages acked)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- then pairs (from ARGV[2]): id, lease token
--
-- Only the current token settles a message: a stale one (the lease expired and the
-- message was leased again, released, buried or purged) changes nothing. A message
-- enqueued with keep_id leaves `done:<id>` behind for that long, so a producer's retry
-- of the same id stays a no-op even after the message ran. Every read and delete is
-- one command for the whole batch, not one per message.
--
-- The value of `done:<id>` is the message's history with the ack appended (see
-- includes/history.lua), so `inspect` can tell a finished message's story.
--
-- Returns one 1 / 0 per pair.

--- @include "clock"
--- @include "batch"
--- @include "receipts"
--- @include "history"

local leased, leases, keep = KEYS[1], KEYS[2], KEYS[3]
local base = ARGV[1]
local ids, valid = current_receipts(leases, 2, 2)
local results, gone, doomed, tokens = {}, {}, {}, {}
for k, id in ipairs(ids) do
  if valid[k] then
    tokens[id] = ARGV[valid[k] + 1]
    gone[#gone + 1] = id
    doomed[#doomed + 1] = base .. 'm:' .. id
    results[k] = 1
  else
    results[k] = 0
  end
end
if #gone > 0 then
  local windows = hmget_many(keep, gone)
  local kept = {}
  local now = nil
  for k, id in ipairs(gone) do
    if windows[k] then
      now = now or now_us()
      local raw = redis.call('HGET', base .. 'm:' .. id, 'hist')
      local story = history_with(raw, now, 'acked', fence_of(tokens[id]), '')
      redis.call('SET', base .. 'done:' .. id, story, 'PX', windows[k])
      kept[#kept + 1] = id
    end
  end
  hdel_many(keep, kept)
  del_many(doomed)
  hdel_many(leases, gone)
  zrem_many(leased, gone)
  redis.call('HINCRBY', KEYS[4], 'acked', #gone)
end
return results
