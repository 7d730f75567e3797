-- Prelude of every lock script (lock_*.lua). Keys of one name share one
-- Cluster hash tag.
-- KEYS[1] holders  zset    hold id -> lease expiry (server ms)
-- KEYS[2] info     hash    hold id -> "mode|token|since ms|meta"; "!m" -> mode of the holders ("w" or "r")
-- KEYS[3] queue    zset    waiter id -> arrival sequence (FIFO order)
-- KEYS[4] qexp     zset    waiter id -> expiry of the waiter entry (server ms)
-- KEYS[5] qdata    hash    waiter id -> "mode|ttl ms|wake channel|meta"
-- KEYS[6] counter  string  fencing token counter (expires: next_token)
-- KEYS[7] seq      string  waiter sequence
-- KEYS[8] marker   string  set while the server has its data (restart.go);
--                          acquire and poll grant nothing without it
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- The token rule, for every path that grants (the fast path of
-- lock_acquire.lua included): a writer advances the counter by one and takes
-- its value; a reader takes the counter as it is (the token of the last
-- writer) and advances nothing. A missing counter (new name, reclaimed, or
-- a server restarted without persistence) starts at the server clock in
-- microseconds. The counter expires ttl ms after the later of now and the
-- instant the server clock passes its value, so that a counter that starts
-- again later starts above every token it gave (as mutex_common.lua's).
local function next_token(incr, ttl)
  local n
  if incr then
    n = redis.call('INCR', KEYS[6])
    if n == 1 then n = nil end
  else
    local c = redis.call('GET', KEYS[6])
    if c then return tonumber(c) end
  end
  if not n then
    n = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('SET', KEYS[6], string.format('%d', n))
  end
  redis.call('PEXPIREAT', KEYS[6], math.max(now, math.ceil(n / 1000)) + ttl)
  return n
end

local function grant(id, mode, ttl, meta)
  local tok = next_token(mode == 'w', ttl)
  redis.call('ZADD', KEYS[1], now + ttl, id)
  redis.call('HSET', KEYS[2], id, mode .. '|' .. string.format('%d', tok) .. '|' .. string.format('%d', now) .. '|' .. meta, '!m', mode)
  return tok
end
-- @end head

local Q, QEXP, QDATA = KEYS[3], KEYS[4], KEYS[5]
local QUEUE_KEYS, HOLD_KEYS = {KEYS[3], KEYS[4], KEYS[5], KEYS[7]}, {KEYS[1], KEYS[2]}
-- @include queue_common

-- @include holders_common

local function holders_mode()
  if redis.call('ZCARD', KEYS[1]) == 0 then return nil end
  return redis.call('HGET', KEYS[2], '!m')
end

-- grant_now grants id at once when no one waits and the holders' mode
-- admits mode (none, or readers for a reader); it returns the token, or nil.
local function grant_now(id, mode, ttl, meta)
  local m = holders_mode()
  if redis.call('ZCARD', KEYS[3]) == 0 and (m == nil or (m == 'r' and mode == 'r')) then
    return grant(id, mode, ttl, meta)
  end
  return nil
end

local function enqueue(id, mode, ttl, ch, meta)
  local seq = redis.call('INCR', KEYS[7])
  redis.call('ZADD', KEYS[3], seq, id)
  redis.call('ZADD', KEYS[4], now + ttl, id)
  redis.call('HSET', KEYS[5], id, mode .. '|' .. fmt(ttl) .. '|' .. ch .. '|' .. meta)
end

-- Hands the lock to the waiters at the head of the queue that fit: one
-- writer, or a run of readers. Each is made a holder here and woken by a
-- message on its channel, so a release is one round trip.
local function handoff()
  prune_queue()
  local m = holders_mode()
  while m ~= 'w' do
    local head, d = queue_head()
    if not head then break end
    local mode, ttl, ch, meta = string.match(d, '^([^|]*)|([^|]*)|([^|]*)|(.*)$')
    if mode == 'w' and m ~= nil then break end
    local tok = grant(head, mode, tonumber(ttl), meta)
    remove_waiter(head)
    redis.call('PUBLISH', ch, head .. '|' .. fmt(tok))
    m = mode
  end
end

local function hold_token(id)
  local info = redis.call('HGET', KEYS[2], id)
  if not info then return 0 end
  local _, tok = string.match(info, '^([^|]*)|([^|]*)|')
  return tonumber(tok)
end
