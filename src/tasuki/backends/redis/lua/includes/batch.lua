-- Variadic ZADD / ZREM / DEL / HDEL / HMGET in chunks: unpack() of a huge table
-- overflows Lua's C stack (about 8000 slots), and one call per member would cost a
-- command each.
local CHUNK = 1000

-- A ZSET created small is stored as a listpack, where every insert scans the whole
-- list: about 2 µs per message at a hundred members, the largest single cost of a lease
-- when few messages are in flight. A member longer than zset-max-listpack-value (64
-- bytes by default) makes Redis create the key as a skiplist instead, and it stays one
-- when that member is removed again, within the same script, unseen by anyone.
local SKIPLIST_SEED = string.rep('~', 200)

-- `pairs_` is {score1, member1, score2, member2, ...}.
local function zadd_many(key, pairs_)
  local n = #pairs_
  if n == 0 then
    return
  end
  local seeded = redis.call('EXISTS', key) == 0
  if seeded then
    redis.call('ZADD', key, 'inf', SKIPLIST_SEED)
  end
  for i = 1, n, 2 * CHUNK do
    redis.call('ZADD', key, unpack(pairs_, i, math.min(i + 2 * CHUNK - 1, n)))
  end
  if seeded then
    redis.call('ZREM', key, SKIPLIST_SEED)
  end
end

-- `command` applied to `key` (if given) and the items, CHUNK items per call.
local function each_chunk(command, key, items)
  local n = #items
  for i = 1, n, CHUNK do
    if key then
      redis.call(command, key, unpack(items, i, math.min(i + CHUNK - 1, n)))
    else
      redis.call(command, unpack(items, i, math.min(i + CHUNK - 1, n)))
    end
  end
end

local function zrem_many(key, members)
  each_chunk('ZREM', key, members)
end

local function hdel_many(key, fields)
  each_chunk('HDEL', key, fields)
end

local function del_many(keys)
  each_chunk('DEL', nil, keys)
end

-- HMGET of many fields; the answer has one entry (a value or false) per field.
local function hmget_many(key, fields)
  local n = #fields
  if n <= CHUNK then
    if n == 0 then
      return {}
    end
    return redis.call('HMGET', key, unpack(fields))
  end
  local out = {}
  for i = 1, n, CHUNK do
    local part = redis.call('HMGET', key, unpack(fields, i, math.min(i + CHUNK - 1, n)))
    for j = 1, #part do
      out[#out + 1] = part[j]
    end
  end
  return out
end
