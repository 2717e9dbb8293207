-- The receipts of a settle call: from ARGV[first], groups of `stride` fields, each group
-- starting with id, lease token. Returns the ids and, per receipt k, the index in ARGV of
-- its group if its token is the current lease of that id, else false. A receipt repeated
-- in the batch is stale the second time, so a message is settled at most once per call.
-- One HMGET for the whole batch. Needs "batch" (hmget_many).
local function current_receipts(leases, first, stride)
  local ids = {}
  for i = first, #ARGV, stride do
    ids[#ids + 1] = ARGV[i]
  end
  local current = hmget_many(leases, ids)
  local valid, seen = {}, {}
  for k, id in ipairs(ids) do
    local a = first + (k - 1) * stride
    if current[k] and current[k] == ARGV[a + 1] and not seen[id] then
      seen[id] = true
      valid[k] = a
    else
      valid[k] = false
    end
  end
  return ids, valid
end
