-- Prelude of every semaphore script (sem_*.lua). Keys of one name share one
-- Cluster hash tag.
-- KEYS[1] holders  zset    hold id -> lease expiry (server ms)
-- KEYS[2] info     hash    hold id -> "n|since ms|meta"
-- KEYS[3] queue    zset    waiter id -> arrival sequence (FIFO order)
-- KEYS[4] qexp     zset    waiter id -> expiry of the waiter entry (server ms)
-- KEYS[5] qdata    hash    waiter id -> "n|ttl ms|wake channel|meta"
-- KEYS[6] capacity string  number of permits (expires: tidy_sem)
-- KEYS[7] seq      string  waiter sequence
-- KEYS[8] marker   string  set while the server has its data (restart.go);
--                          acquire and poll grant nothing without it
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local Q, QEXP, QDATA = KEYS[3], KEYS[4], KEYS[5]
local QUEUE_KEYS, HOLD_KEYS = {KEYS[3], KEYS[4], KEYS[5], KEYS[7]}, {KEYS[1], KEYS[2]}
-- @include queue_common

-- @include holders_common

-- Returns the capacity, setting it when the semaphore is new, or nil when
-- another capacity is stored.
local function capacity(want)
  local c = redis.call('GET', KEYS[6])
  if not c then
    redis.call('SET', KEYS[6], fmt(want), 'PX', 1000)
    return want
  end
  if tonumber(c) ~= want then return nil end
  return want
end

-- tidy_sem is tidy for a semaphore: the capacity goes with the last of the
-- other keys, or one second from now when there are none, so that an idle
-- semaphore leaves no key (and a handle opened later may store another
-- capacity; the handles of the old one then find it mismatched).
local function tidy_sem()
  tidy()
  local keep = math.max(redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[4]), 1000)
  redis.call('PEXPIRE', KEYS[6], keep)
end

local function used()
  local sum = 0
  for _, v in ipairs(redis.call('HVALS', KEYS[2])) do
    sum = sum + tonumber(string.match(v, '^([^|]*)|'))
  end
  return sum
end

local function grant(id, n, ttl, meta)
  redis.call('ZADD', KEYS[1], now + ttl, id)
  redis.call('HSET', KEYS[2], id, fmt(n) .. '|' .. fmt(now) .. '|' .. meta)
end

local function enqueue(id, n, ttl, ch, meta)
  local seq = redis.call('INCR', KEYS[7])
  redis.call('ZADD', KEYS[3], seq, id)
  redis.call('ZADD', KEYS[4], now + ttl, id)
  redis.call('HSET', KEYS[5], id, fmt(n) .. '|' .. fmt(ttl) .. '|' .. ch .. '|' .. meta)
end

-- Grants waiters from the head of the queue while their requests fit. The
-- order is strict: a large request at the head is not overtaken by small
-- ones behind it.
local function handoff(cap)
  prune_queue()
  local u = used()
  while true do
    local head, d = queue_head()
    if not head then break end
    local n, ttl, ch, meta = string.match(d, '^([^|]*)|([^|]*)|([^|]*)|(.*)$')
    n = tonumber(n)
    if u + n > cap then break end
    grant(head, n, tonumber(ttl), meta)
    remove_waiter(head)
    redis.call('PUBLISH', ch, head .. '|0')
    u = u + n
  end
  return u
end

-- admit begins sem_acquire and sem_poll. It returns their reply when the
-- marker is missing (-2: the server lost its data or is new, restart.go)
-- or another capacity than want is stored (-1); else nil, the capacity and
-- the permits in use once the head of the queue was granted what fits.
local function admit(want)
  if redis.call('EXISTS', KEYS[8]) == 0 then return -2 end
  local cap = capacity(want)
  if not cap then return -1 end
  prune_holders()
  return nil, cap, handoff(cap)
end

