-- A lease record: "owner\nuntil_ms\ncopy\nreceives\nfence" (see lease_take.lua). An
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
