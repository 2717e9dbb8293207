-- records_listing_page: one page of a queue's listed entries in one state, by time then
-- id, after a cursor (see records_listing_put.lua). Reads only; an id whose hash has
-- expired is skipped.
--
-- KEYS[1]   the queue's listing tag
--
-- ARGV[1]   the state: 'in_flight' or 'dead'
-- ARGV[2]   the job, or '' for every job
-- ARGV[3]   '1' newest first, '0' oldest first
-- ARGV[4]   the most entries to return
-- ARGV[5]   only entries later than this (epoch seconds: now for in-flight ones, whose
--           lease has not expired)
-- ARGV[6]   the cursor's time, or '' to start at the beginning
-- ARGV[7]   the cursor's id
--
-- Returns a flat list: 1 if more entries follow (else 0), then per entry its id, time,
-- job, token, body, headers and info.

local tag, state, job = KEYS[1], ARGV[1], ARGV[2]
local newest, limit, floor = ARGV[3] == '1', tonumber(ARGV[4]), ARGV[5]
local cur_at, cur_id = ARGV[6], ARGV[7]
local set = tag .. ':' .. state
if job ~= '' then set = set .. ':job:' .. job end
local want = limit + 1
local ids = {}
if cur_at ~= '' and tonumber(cur_at) > tonumber(floor) then
  -- the ties at the cursor's time, then what follows it
  local ties = redis.call('ZRANGEBYSCORE', set, cur_at, cur_at)
  if newest then
    for n = #ties, 1, -1 do
      if ties[n] < cur_id and #ids < want then ids[#ids + 1] = ties[n] end
    end
  else
    for n = 1, #ties do
      if ties[n] > cur_id and #ids < want then ids[#ids + 1] = ties[n] end
    end
  end
  local rest
  if newest then
    rest = redis.call('ZREVRANGEBYSCORE', set, '(' .. cur_at, '(' .. floor, 'LIMIT', 0,
      want - #ids)
  else
    rest = redis.call('ZRANGEBYSCORE', set, '(' .. cur_at, '+inf', 'LIMIT', 0, want - #ids)
  end
  for _, id in ipairs(rest) do ids[#ids + 1] = id end
elseif newest then
  ids = redis.call('ZREVRANGEBYSCORE', set, '+inf', '(' .. floor, 'LIMIT', 0, want)
else
  ids = redis.call('ZRANGEBYSCORE', set, '(' .. floor, '+inf', 'LIMIT', 0, want)
end
local base = tag .. ':' .. state .. ':e:'
local out = {0}
local n = 0
for _, id in ipairs(ids) do
  if n == limit then
    out[1] = 1
    break
  end
  local e = redis.call('HMGET', base .. id, 'at', 'job', 'token', 'body', 'headers', 'info')
  if e[1] then
    out[#out + 1] = id
    out[#out + 1] = e[1]
    out[#out + 1] = e[2]
    out[#out + 1] = e[3]
    out[#out + 1] = e[4]
    out[#out + 1] = e[5]
    out[#out + 1] = e[6]
    n = n + 1
  end
end
return out
