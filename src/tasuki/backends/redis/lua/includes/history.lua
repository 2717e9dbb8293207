-- How a lease ended, appended to the message's `hist` field (for `inspect`): a JSON array
-- of at most HISTORY_LIMIT entries [at µs, event, fence, detail], oldest first. Written
-- only where a lease ends other than by a plain ack (retry, release, burial, lost lease)
-- or by the ack of a message whose id is kept, so the hot path (lease, ack) pays nothing.
-- Needs "clock" (int_text).
local HISTORY_LIMIT = 5

local function history_with(raw, at, event, fence, detail)
  local entries = {}
  if raw then
    entries = cjson.decode(raw)
  end
  entries[#entries + 1] = {int_text(at), event, tostring(fence), detail}
  while #entries > HISTORY_LIMIT do
    table.remove(entries, 1)
  end
  return cjson.encode(entries)
end

local function push_history(mkey, at, event, fence, detail)
  local raw = redis.call('HGET', mkey, 'hist')
  redis.call('HSET', mkey, 'hist', history_with(raw, at, event, fence, detail))
end

-- The fencing number a lease token ends with (`<nonce>.<fence>`).
local function fence_of(token)
  return string.match(token, '%.(%d+)$') or '0'
end
