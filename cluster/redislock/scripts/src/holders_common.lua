-- Functions of the holds kept as leases in a zset, shared by lock_common.lua
-- and sem_common.lua, which include this file at their line
-- "-- @include holders_common", after defining now (server ms):
--   KEYS[1]  holders zset, hold id -> lease expiry (server ms)
--   KEYS[2]  info hash, hold id -> the hold's data

-- prune_holders drops the holds whose lease has expired.
local function prune_holders()
  local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
  for _, id in ipairs(dead) do
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
  end
end
