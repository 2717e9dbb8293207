-- A lease record: "owner\nuntil_ms\ncopy\nreceives\nfence" (see records_take.lua). An
-- older record lacks receives and fence (read as 0: unknown), or is a bare token (read
-- as a lapsed lease of that owner).
local function read_lease(record)
  local owner, until_ms, rest = string.match(record, '^(.-)\n(%d+)\n(.*)$')
  if not owner then
    return record, 0, '', 0, 0
  end
  local copy, receives, fence = string.match(rest, '^(.-)\n(%d+)\n(%d+)$')
  if not copy then
    return owner, tonumber(until_ms), rest, 0, 0
  end
  return owner, tonumber(until_ms), copy, tonumber(receives), tonumber(fence)
end

local function lease_text(owner, until_ms, copy, receives, fence)
  return owner .. '\n' .. string.format('%.0f', until_ms) .. '\n' .. copy .. '\n'
    .. string.format('%.0f', receives) .. '\n' .. string.format('%.0f', fence)
end

-- The copy, receives and fence of the record at `key` if `token` holds its lease now;
-- nil if the record is gone, settled, or another lease's (the caller's token is stale).
local function held_lease(key, token)
  local cur = redis.call('GET', key)
  if not cur or token == '' then
    return nil
  end
  local owner, _, copy, receives, fence = read_lease(cur)
  if owner ~= token then
    return nil
  end
  return copy, receives, fence
end

-- Milliseconds of the server's clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
