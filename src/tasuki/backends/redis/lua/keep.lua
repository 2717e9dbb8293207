-- keep: keep leases of one queue alive, each with its job's latest progress (the lease
-- keeper's heartbeat, `Backend.keep`).
--
-- KEYS[1]  leased ZSET
-- KEYS[2]  leases HASH (id -> token of the current lease)
-- KEYS[3]  limited HASH (messages with rate or concurrency limits: id -> limits)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- then, per item (4 fields each, from ARGV[2]): id, lease token, visibility timeout
--   (µs), progress ('' = none, else `<fence> <JSON [fraction, text]>`)
--
-- Only the current token keeps its lease: its expiry becomes now + the visibility
-- timeout and its progress is stored (tagged with its fence, so `inspect` shows it
-- only while that lease is the message's latest). A stale token changes nothing, and
-- learns whether the message was cancelled under it (`x:<id>` holds the token the
-- cancel fenced out). A kept lease keeps its concurrency slots until its new expiry,
-- and their keys live at least that long. A lapsed lease of a message under limits is
-- lost, even where no one leased it since: the slot it held may be another's now.
--
-- Returns one code per item: 1 held, 0 lost, 2 cancelled.

--- @include "clock"
--- @include "batch"
--- @include "signal"
--- @include "limits"

local base = ARGV[1]
local now = now_us()
local ids = {}
for i = 2, #ARGV, 4 do
  ids[#ids + 1] = ARGV[i]
end
local current = hmget_many(KEYS[2], ids)
local lims = {}
if redis.call('EXISTS', KEYS[3]) == 1 then
  lims = hmget_many(KEYS[3], ids)
end
local results, expiries, held, held_lims, held_until = {}, {}, {}, {}, {}
for k, id in ipairs(ids) do
  local p = 4 * k - 2
  local token = ARGV[p + 1]
  local live = current[k] and current[k] == token
  if live and lims[k] then
    local expiry = redis.call('ZSCORE', KEYS[1], id)
    live = expiry and tonumber(expiry) > now
  end
  if live then
    local expiry = now + tonumber(ARGV[p + 2])
    expiries[#expiries + 1] = expiry
    expiries[#expiries + 1] = id
    if lims[k] then
      held[#held + 1] = id
      held_lims[#held] = lims[k]
      held_until[#held] = expiry
    end
    if ARGV[p + 3] ~= '' then
      redis.call('HSET', base .. 'm:' .. id, 'progress', ARGV[p + 3])
    end
    results[k] = 1
  elseif redis.call('GET', base .. 'x:' .. id) == token then
    results[k] = 2
  else
    results[k] = 0
  end
end
zadd_many(KEYS[1], expiries)
for k, id in ipairs(held) do
  extend_slots(base, id, cjson.decode(held_lims[k]), held_until[k], now)
end
return results
