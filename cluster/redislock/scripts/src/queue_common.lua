-- Functions of the FIFO waiter queue shared by mutex_common.lua,
-- lock_common.lua, sem_common.lua and cond_common.lua, which include this
-- file at their line "-- @include queue_common", after defining now
-- (server ms) and these keys, as those files describe them:
--   Q, QEXP, QDATA  the queue, waiter expiries and waiter data;
--   QUEUE_KEYS      the keys that go when the last waiter entry ends;
--   HOLD_KEYS       the holders zset first, then the keys that go with it
--                   when the last lease ends; nil for the Mutex, whose
--                   hold key expires with its lease.

local function fmt(n) return string.format('%d', n) end

local function remove_waiter(id)
  local r = redis.call('ZREM', Q, id)
  redis.call('ZREM', QEXP, id)
  redis.call('HDEL', QDATA, id)
  return r
end

-- queue_head returns the first waiter in the queue and its data, after
-- removing the entries before it whose data is gone; nil when no waiter is
-- left.
local function queue_head()
  while true do
    local head = redis.call('ZRANGE', Q, 0, 0)[1]
    if not head then return nil end
    local d = redis.call('HGET', QDATA, head)
    if d then return head, d end
    remove_waiter(head)
  end
end

local function prune_queue()
  local dead = redis.call('ZRANGEBYSCORE', QEXP, '-inf', now)
  for _, id in ipairs(dead) do remove_waiter(id) end
end

-- last_score returns the highest score of zset key, or nil when it is empty.
local function last_score(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then return tonumber(last[2]) end
  return nil
end

-- expire_after gives keys the expiry of the highest score of zset (server
-- ms) plus one second, or deletes them when zset is empty.
local function expire_after(zset, keys)
  local last = last_score(zset)
  if not last then
    redis.call('DEL', unpack(keys))
    return
  end
  for _, k in ipairs(keys) do redis.call('PEXPIRE', k, last - now + 1000) end
end

-- tidy lets the keys of a name vanish one second after the last lease and
-- the last waiter entry end.
local function tidy()
  if HOLD_KEYS then expire_after(HOLD_KEYS[1], HOLD_KEYS) end
  expire_after(QEXP, QUEUE_KEYS)
end
