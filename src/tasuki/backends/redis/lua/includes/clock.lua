-- The server clock, in whole microseconds. Every time a script uses comes from here,
-- so producers and workers with skewed clocks still agree; callers pass durations.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- A whole number as text. Lua's `..` prints 14 significant digits, which would round a
-- 16-digit microsecond time; redis.call() arguments are exact, string building is not.
local function int_text(n)
  return string.format('%.0f', n)
end
