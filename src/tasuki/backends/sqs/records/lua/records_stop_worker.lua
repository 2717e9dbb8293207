-- records_stop_worker: ask a known worker to stop (SQS's console records on a Redis
-- lock store, redis_console.py).
--
-- KEYS[1]    the workers' announces (hash: id -> JSON)
-- KEYS[2]    the workers asked to stop (set)
--
-- ARGV[1]    the worker's id
--
-- Returns 1 if the worker is known (its stop asked), else 0.

if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('SADD', KEYS[2], ARGV[1])
return 1
