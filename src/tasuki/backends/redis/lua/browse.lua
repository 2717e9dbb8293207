-- browse: one page of a queue's messages in one state, for the console (read-only).
--
-- KEYS[1]  waiting ZSET
-- KEYS[2]  delayed ZSET (delayed messages of priority > 0)
-- KEYS[3]  leased ZSET
-- KEYS[4]  dead ZSET
--
-- ARGV[1]  queue key base, `<prefix>{<queue>}:`
-- ARGV[2]  state: 'ready', 'delayed', 'in_flight' or 'dead'
-- ARGV[3]  '1': newest first, '0': oldest first
-- ARGV[4]  page size
-- ARGV[5]  cursor ('' = from the start): `<score>:<id>` of the last message walked
-- ARGV[6]  job name ('' = any job)
-- ARGV[7]  the job's header (`tasuki-job`)
-- ARGV[8]  how many messages one call walks at most when it filters (by job, by match)
-- ARGV[9]  the arguments to match ('' = none): a JSON list of [key, want, index], `want`
--          a JSON string or number the argument must equal: the keyword argument `key`,
--          else (index >= 0) the positional one at `index` (0-based). A prefilter: a
--          message whose body is not JSON passes it, and the caller checks what passes.
-- ARGV[10] the content type's header (`tasuki-content-type`)
--
-- Each listing walks the ZSETs the lease already keeps, in their order (score, then id):
-- ready is `waiting` and `delayed` up to now (a rank in `waiting`: visible time -
-- priority x aging), delayed the same above now, in flight `leased` above now (by lease
-- expiry), dead `dead` (by time of death). A page of a state held by two ZSETs merges
-- them. With a job name, messages of other jobs are walked past, at most ARGV[8] of them
-- per call: a page may then hold fewer messages than asked, even none, with a cursor
-- to go on from (no index per job: enqueue, lease and settle pay nothing for listings).
-- With arguments to match, the same: each message walked has its body decoded here
-- (cjson) and compared, so what does not match costs no reply.
--
-- Returns {now µs, the cursor to continue from ('' = the end), then a `listed` record
-- per message}: its id, the score its cursor holds, the state's time (visible time,
-- lease expiry or death, µs), body, headers and the fields of inspect.lua's `message`.
--- @reply listed: id score at body headers attempt max_attempts fence enqueued_us reason error_type error_message error_traceback hist priority progress

--- @include "clock"

local base, state, newest = ARGV[1], ARGV[2], ARGV[3] == '1'
local limit = tonumber(ARGV[4])
local job, job_header, budget = ARGV[6], ARGV[7], tonumber(ARGV[8])
local match, type_header = nil, ARGV[10]
if ARGV[9] and ARGV[9] ~= '' then
  match = cjson.decode(ARGV[9])
end
local filtered = job ~= '' or match ~= nil
local now = now_us()

-- The ranges walked: a ZSET, its bounds (numbers, inclusive) and whether its score is a
-- rank (the visible time is the priority's boost later).
local sources
if state == 'ready' then
  sources = {{KEYS[1], -math.huge, now, true}, {KEYS[2], -math.huge, now, false}}
elseif state == 'delayed' then
  sources = {{KEYS[1], now + 1, math.huge, true}, {KEYS[2], now + 1, math.huge, false}}
elseif state == 'in_flight' then
  sources = {{KEYS[3], now + 1, math.huge, false}}
else
  sources = {{KEYS[4], -math.huge, math.huge, false}}
end

local after_score, after_id = nil, nil
if ARGV[5] ~= '' then
  local s, id = string.match(ARGV[5], '^([^:]+):(.*)$')
  after_score, after_id = tonumber(s), id
end

local function bound(n)
  if n == math.huge then
    return '+inf'
  elseif n == -math.huge then
    return '-inf'
  end
  return string.format('%.17g', n)
end

-- Whether (score, id) comes after (s, i) in the listing's direction.
local function later(score, id, s, i)
  if score ~= s then
    if newest then
      return score < s
    end
    return score > s
  end
  if newest then
    return id < i
  end
  return id > i
end

-- Up to `n` entries of one source after the position, in order: {score, id, text, rank}.
local function walk(src, s, i, n)
  local key, lo, hi = src[1], src[2], src[3]
  if s then
    if newest and s < hi then
      hi = s
    elseif not newest and s > lo then
      lo = s
    end
  end
  if lo > hi then
    return {}
  end
  local out, offset, step = {}, 0, n + 1
  while #out < n do
    local got
    if newest then
      got = redis.call('ZRANGE', key, bound(hi), bound(lo), 'BYSCORE', 'REV', 'LIMIT', offset,
        step, 'WITHSCORES')
    else
      got = redis.call('ZRANGE', key, bound(lo), bound(hi), 'BYSCORE', 'LIMIT', offset, step,
        'WITHSCORES')
    end
    for k = 1, #got, 2 do
      local score = tonumber(got[k + 1])
      if not s or later(score, got[k], s, i) then
        out[#out + 1] = {score, got[k], got[k + 1], src[4]}
        if #out == n then
          break
        end
      end
    end
    if #got < 2 * step then
      break
    end
    offset = offset + step
  end
  return out
end

-- The next `n` entries of the listing after the position, the sources merged.
local function next_entries(s, i, n)
  local all, from = {}, 0
  for _, src in ipairs(sources) do
    local got = walk(src, s, i, n)
    if #got > 0 then
      from = from + 1
    end
    for _, e in ipairs(got) do
      all[#all + 1] = e
    end
  end
  if from > 1 then
    table.sort(all, function(a, b)
      return later(b[1], b[2], a[1], a[2])
    end)
  end
  while #all > n do
    all[#all] = nil
  end
  return all
end

local function job_of(headers)
  local ok, decoded = pcall(cjson.decode, headers)
  if ok and type(decoded) == 'table' then
    return decoded[job_header]
  end
  return nil
end

-- Whether a message's arguments may match: every key's value equal (the caller checks
-- again, by its own rules, what passes). A body that is not JSON passes.
local function may_match(headers, body)
  if string.find(headers, type_header, 1, true) then
    local ok, decoded = pcall(cjson.decode, headers)
    if ok and type(decoded) == 'table' then
      local kind = decoded[type_header]
      if kind ~= nil and kind ~= 'json' then
        return true
      end
    end
  end
  local fine, payload = pcall(cjson.decode, body)
  if not fine or type(payload) ~= 'table' then
    return true
  end
  local args, kwargs = payload['args'], payload['kwargs']
  if type(args) ~= 'table' then args = {} end
  if type(kwargs) ~= 'table' then kwargs = {} end
  for _, rule in ipairs(match) do
    local key, want, index = rule[1], rule[2], rule[3]
    local value = kwargs[key]
    if value == nil and index >= 0 then
      value = args[index + 1]
    end
    if value == nil or value ~= want then
      return false
    end
  end
  return true
end

local found, walked = {}, 0
local s, i = after_score, after_id
local ended = false
while #found <= limit do
  local want = limit + 1 - #found
  if filtered then
    want = math.max(want, math.min(100, budget - walked))
  end
  if want <= 0 then
    break
  end
  local entries = next_entries(s, i, want)
  for _, e in ipairs(entries) do
    walked = walked + 1
    s, i = e[1], e[2]
    local mkey = base .. 'm:' .. e[2]
    local wanted = true
    if job ~= '' then
      -- Walking past another job's message reads its headers only.
      wanted = job_of(redis.call('HGET', mkey, 'headers') or '{}') == job
    end
    if wanted and match then
      local got = redis.call('HMGET', mkey, 'headers', 'body')
      wanted = got[2] ~= false and may_match(got[1] or '{}', got[2])
    end
    if wanted then
      local f = redis.call('HMGET', mkey, 'body', 'headers', 'attempt', 'max_attempts',
        'fence', 'enqueued_us', 'reason', 'error_type', 'error_message', 'error_traceback',
        'hist', 'priority', 'progress', 'boost_us')
      if f[1] then
        found[#found + 1] = {e, f}
        if #found > limit then
          break
        end
      end
    end
    if filtered and walked >= budget then
      break
    end
  end
  if #entries < want then
    ended = #found <= limit
    break
  end
  if filtered and walked >= budget then
    break
  end
end

local out = {int_text(now), ''}
local shown = math.min(#found, limit)
if #found > limit then
  local last = found[limit][1]
  out[2] = last[3] .. ':' .. last[2]
elseif not ended and s then
  out[2] = string.format('%s', bound(s)) .. ':' .. i
end
for k = 1, shown do
  local e, f = found[k][1], found[k][2]
  local at = e[1]
  if e[4] then
    at = at + (tonumber(f[14]) or 0)
  end
  out[#out + 1] = e[2]
  out[#out + 1] = e[3]
  out[#out + 1] = int_text(at)
  for j = 1, 13 do
    out[#out + 1] = f[j] or ''
  end
end
return out
