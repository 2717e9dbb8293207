-- A lease record: "owner\nuntil_ms\ncopy\nreceives\nfence[\nprogress]" (see
-- records_take.lua; progress is JSON without a newline). An older record lacks receives
-- and fence (read as 0: unknown), or is a bare token (read as a lapsed lease of that
-- owner). A cancelled message's owner is CANCELLED .. the token of the lease that ran.
local function read_lease(record)
  local owner, until_ms, rest = string.match(record, '^(.-)\n(%d+)\n(.*)$')
  if not owner then
    return record, 0, '', 0, 0
  end
  local copy, receives, fence = string.match(rest, '^(.-)\n(%d+)\n(%d+)$')
  local progress = ''
  if not copy then
    copy, receives, fence, progress = string.match(rest, '^(.-)\n(%d+)\n(%d+)\n(.*)$')
  end
  if not copy then
    return owner, tonumber(until_ms), rest, 0, 0, ''
  end
  return owner, tonumber(until_ms), copy, tonumber(receives), tonumber(fence), progress
end

local CANCELLED = '~cancelled~'
-- An acked step's owner while the steps it enqueues are still to be sent (UNSENT_OWNER,
-- records/base.py): this prefix, then those steps as JSON. The same copy met meanwhile
-- is UNSENT_TAKE (records_take.lua), any other refused as if leased.
local UNSENT = '~unsent~'

local function cancelled(owner)
  return string.sub(owner, 1, string.len(CANCELLED)) == CANCELLED
end

local function unsent(owner)
  return string.sub(owner, 1, string.len(UNSENT)) == UNSENT
end

local function lease_text(owner, until_ms, copy, receives, fence, progress)
  local text = owner .. '\n' .. string.format('%.0f', until_ms) .. '\n' .. copy .. '\n'
    .. string.format('%.0f', receives) .. '\n' .. string.format('%.0f', fence)
  if progress and progress ~= '' then
    text = text .. '\n' .. progress
  end
  return text
end

-- The copy, receives, fence and progress of the record at `key` if `token` holds its
-- lease now; nil if the record is gone, settled, or another lease's (the caller's token
-- is stale), and then whether it was cancelled while `token` held it.
local function held_lease(key, token)
  local cur = redis.call('GET', key)
  if not cur or token == '' then
    return nil, false
  end
  local owner, _, copy, receives, fence, progress = read_lease(cur)
  if owner ~= token then
    return nil, owner == CANCELLED .. token
  end
  return copy, receives, fence, progress
end

-- Milliseconds of the server's clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
