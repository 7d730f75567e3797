-- Prelude of every condition variable script (cond_*.lua).
-- KEYS[1] queue  zset   ticket -> arrival sequence
-- KEYS[2] qexp   zset   ticket -> expiry of the registration (server ms)
-- KEYS[3] qdata  hash   ticket -> wake channel
-- KEYS[4] seq    string ticket sequence
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function remove(id)
  local r = redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  return r
end

local function prune()
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do remove(id) end
end

-- Wakes up to max waiters (all when max is 0), oldest first.
local function wake(max)
  prune()
  local woken = 0
  while max == 0 or woken < max do
    local head = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
    if not head then break end
    local ch = redis.call('HGET', KEYS[3], head)
    remove(head)
    if ch then
      redis.call('PUBLISH', ch, head .. '|0')
      woken = woken + 1
    end
  end
  return woken
end

local function tidy()
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if last[2] then
    local keep = tonumber(last[2]) - now + 1000
    for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], keep) end
  else
    redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
  end
end
