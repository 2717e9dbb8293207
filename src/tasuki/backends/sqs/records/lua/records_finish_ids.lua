-- records_finish_ids: keep each finished id for its window (its owner '' from then on:
-- finished), or forget it (one batch).
--
-- KEYS[i]        the id record of message i
--
-- ARGV[2*i - 1]  the owner that must hold it, or '' for whoever does
-- ARGV[2*i]      how long to keep it (ms); 0 forgets it now
--
-- Returns nothing.

for i, key in ipairs(KEYS) do
  local owner, keep = ARGV[2 * i - 1], tonumber(ARGV[2 * i])
  if owner == '' or redis.call('GET', key) == owner then
    if keep > 0 then
      redis.call('SET', key, '', 'PX', keep, 'XX')
    else
      redis.call('DEL', key)
    end
  end
end
return 0
