-- sem_poll: a queued waiter checks in (see lock_poll.lua).
-- KEYS: as in sem_common.lua
-- ARGV[1] hold id, ARGV[2] n, ARGV[3] lease TTL ms, ARGV[4] meta,
-- ARGV[5] wake channel, ARGV[6] capacity
-- Returns 1 when held (lease renewed from now), 0 when still queued, -1 on
-- a capacity mismatch, -2 when the marker is missing.
local id, n, ttl, meta, ch = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5]
local refused, cap, u = admit(tonumber(ARGV[6]))
if refused then return refused end
if redis.call('ZSCORE', KEYS[1], id) then
  redis.call('ZADD', KEYS[1], now + ttl, id)
  tidy_sem()
  return 1
end
if redis.call('ZSCORE', KEYS[3], id) then
  redis.call('ZADD', KEYS[4], now + ttl, id)
elseif redis.call('ZCARD', KEYS[3]) == 0 and u + n <= cap then
  grant(id, n, ttl, meta)
  tidy_sem()
  return 1
else
  enqueue(id, n, ttl, ch, meta)
end
tidy_sem()
return 0
