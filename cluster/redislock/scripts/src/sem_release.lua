-- sem_release: give back n permits of one hold, then grant waiters.
-- KEYS: as in sem_common.lua
-- ARGV[1] hold id, ARGV[2] n, ARGV[3] capacity
-- Returns 1 when released, 0 when the hold was gone (lost).
local id, n = ARGV[1], tonumber(ARGV[2])
prune_holders()
local info = redis.call('HGET', KEYS[2], id)
if not redis.call('ZSCORE', KEYS[1], id) or not info then
  tidy_sem()
  return 0
end
local held, rest = string.match(info, '^([^|]*)|(.*)$')
held = tonumber(held)
if n >= held then
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
else
  redis.call('HSET', KEYS[2], id, fmt(held - n) .. '|' .. rest)
end
local cap = capacity(tonumber(ARGV[3]))
if cap then handoff(cap) end
tidy_sem()
return 1
