-- Functions of the FIFO waiter queue shared by mutex_common.lua,
-- lock_common.lua and sem_common.lua, which include this file at their line
-- "-- @include queue_common", after defining now (server ms).
-- KEYS[3] queue, KEYS[4] qexp, KEYS[5] qdata, as those files describe them.

local function fmt(n) return string.format('%d', n) end

local function remove_waiter(id)
  redis.call('ZREM', KEYS[3], id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('HDEL', KEYS[5], id)
end

local function prune_queue()
  local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)
  for _, id in ipairs(dead) do remove_waiter(id) end
end

-- last_score returns the highest score of zset key, or nil when it is empty.
local function last_score(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then return tonumber(last[2]) end
  return nil
end
