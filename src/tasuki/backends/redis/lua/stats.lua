-- stats: counts of one queue by state, and the age of its oldest ready message.
--
-- KEYS[1]  waiting ZSET
-- KEYS[2]  leased ZSET
-- KEYS[3]  dead ZSET
--
-- No ARGV. Read-only: a handful of O(log n) ZCOUNTs, cheap enough to poll every second.
--
-- Returns one `stats` record: the counts and the oldest ready age (µs, 0 if none ready).
--- @reply stats: ready in_flight delayed dead oldest_ready_age_us
-- Ready counts expired leases too: they are deliverable again.

--- @include "clock"

local waiting, leased = KEYS[1], KEYS[2]
local now = now_us()
local now_text = int_text(now)
local after = '(' .. now_text
local ready = redis.call('ZCOUNT', waiting, '-inf', now_text)
  + redis.call('ZCOUNT', leased, '-inf', now_text)
local in_flight = redis.call('ZCOUNT', leased, after, '+inf')
local delayed = redis.call('ZCOUNT', waiting, after, '+inf')
local dead = redis.call('ZCARD', KEYS[3])
local oldest = nil
for _, key in ipairs({waiting, leased}) do
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if first[2] then
    local score = tonumber(first[2])
    if score <= now and (not oldest or score < oldest) then
      oldest = score
    end
  end
end
local age = 0
if oldest then
  age = now - oldest
end
return {ready, in_flight, delayed, dead, age}
