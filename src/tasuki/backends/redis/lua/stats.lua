-- stats: counts of one queue by state, and the age of its oldest ready message.
--
-- KEYS[1]  waiting ZSET
-- KEYS[2]  leased ZSET
-- KEYS[3]  dead ZSET
-- KEYS[4]  delayed ZSET (delayed messages of priority > 0)
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
--
-- Read-only: a handful of O(log n) ZCOUNTs, cheap enough to poll every second.
--
-- Returns one `stats` record: the counts and the oldest ready age (µs, 0 if none ready).
--- @reply stats: ready in_flight delayed dead oldest_ready_age_us
-- Ready counts expired leases too: they are deliverable again, and `delayed` messages
-- whose time came (the next lease moves them to `waiting`). A message of priority p is
-- ranked p x aging ahead of its visible time; its age counts from its visible time.

--- @include "clock"

local waiting, leased, delayed = KEYS[1], KEYS[2], KEYS[4]
local base = ARGV[1]
local now = now_us()
local now_text = int_text(now)
local after = '(' .. now_text
local ready = redis.call('ZCOUNT', waiting, '-inf', now_text)
  + redis.call('ZCOUNT', leased, '-inf', now_text)
  + redis.call('ZCOUNT', delayed, '-inf', now_text)
local in_flight = redis.call('ZCOUNT', leased, after, '+inf')
local later = redis.call('ZCOUNT', waiting, after, '+inf')
  + redis.call('ZCOUNT', delayed, after, '+inf')
local dead = redis.call('ZCARD', KEYS[3])
local oldest = nil
for _, key in ipairs({waiting, leased, delayed}) do
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if first[2] then
    local score = tonumber(first[2])
    if score <= now then
      if key == waiting then
        local boost = redis.call('HGET', base .. 'm:' .. first[1], 'boost_us')
        score = score + (tonumber(boost) or 0)
      end
      if not oldest or score < oldest then
        oldest = math.min(score, now)
      end
    end
  end
end
local age = 0
if oldest then
  age = now - oldest
end
return {ready, in_flight, later, dead, age}
