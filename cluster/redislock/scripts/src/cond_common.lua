-- Prelude of every condition variable script (cond_*.lua).
-- KEYS[1] queue  zset   ticket -> arrival sequence
-- KEYS[2] qexp   zset   ticket -> expiry of the registration (server ms)
-- KEYS[3] qdata  hash   ticket -> wake channel
-- KEYS[4] seq    string ticket sequence
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local Q, QEXP, QDATA = KEYS[1], KEYS[2], KEYS[3]
local QUEUE_KEYS, HOLD_KEYS = {KEYS[1], KEYS[2], KEYS[3], KEYS[4]}, nil
-- @include queue_common

-- Wakes up to max waiters (all when max is 0), oldest first.
local function wake(max)
  prune_queue()
  local woken = 0
  while max == 0 or woken < max do
    local head, ch = queue_head()
    if not head then break end
    remove_waiter(head)
    redis.call('PUBLISH', ch, head .. '|0')
    woken = woken + 1
  end
  return woken
end

