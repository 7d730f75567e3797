-- Prelude of the Mutex scripts (mutex_*.lua). A Mutex has one holder at a
-- time, so its hold is one string key with the lease as its expiry: the
-- uncontended Lock and Unlock touch that key and the counter only. Keys of
-- one name share one Cluster hash tag.
-- KEYS[1] owner    string  "hold id|token|since ms|meta", expires with the lease
-- KEYS[2] counter  string  fencing token counter (expires: next_token)
-- KEYS[3] queue    zset    waiter id -> arrival sequence (FIFO order)
-- KEYS[4] qexp     zset    waiter id -> expiry of the waiter entry (server ms)
-- KEYS[5] qdata    hash    waiter id -> "ttl ms|wake channel|meta"
-- KEYS[6] seq      string  waiter sequence
-- KEYS[7] marker   string  set while the server has its data (restart.go);
--                          acquire and poll grant nothing without it

-- next_token draws the token of an acquisition and reserves the 15 after
-- it, which the holder's backend gives when its handles pass the lock among
-- themselves (local.go); it returns the token and its decimal string. c is
-- the server's TIME when the script has read it already. A
-- missing counter (new name, reclaimed, or a server restarted without
-- persistence) starts at the server clock in microseconds. The counter
-- expires ttl ms after the later of now and the instant the server clock
-- passes the last token reserved, so that a counter that starts again later
-- starts above every token it gave: an idle name leaves no key behind, and
-- tokens keep growing (see "Fencing tokens" in redislock.go for failover).
-- One SET writes the value and the expiry: a write costs a script more
-- than a read.
local function next_token(ttl, c)
  local n = redis.call('GET', KEYS[2])
  c = c or redis.call('TIME')
  if n then
    n = tonumber(n) + 16
  else
    n = tonumber(c[1]) * 1000000 + tonumber(c[2])
  end
  local ms = tonumber(c[1]) * 1000 + math.floor(tonumber(c[2]) / 1000)
  local s = string.format('%d', n)
  redis.call('SET', KEYS[2], s, 'PXAT', math.max(ms, math.ceil((n + 15) / 1000)) + ttl)
  return n, s
end
-- @end head

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local Q, QEXP, QDATA = KEYS[3], KEYS[4], KEYS[5]
local QUEUE_KEYS, HOLD_KEYS = {KEYS[3], KEYS[4], KEYS[5], KEYS[6]}, nil
-- @include queue_common

-- owner_token returns the token of hold id when id holds the lock, else nil.
local function owner_token(id)
  local v = redis.call('GET', KEYS[1])
  if not v or string.sub(v, 1, #id + 1) ~= id .. '|' then return nil end
  return tonumber(string.match(v, '^[^|]*|([^|]*)|'))
end

local function grant(id, ttl, meta)
  local tok, s = next_token(ttl, t)
  redis.call('SET', KEYS[1], id .. '|' .. s .. '|' .. fmt(now) .. '|' .. meta, 'PX', ttl)
  return tok
end

-- queue_added keeps the queue's keys until a second past exp (server ms),
-- the expiry of an entry just added or refreshed. Keys short of that get a
-- TTL more, so that a busy queue rewrites their expiries about once a TTL
-- rather than at every arrival; a queue left alone still goes within a TTL
-- and a second of its last entry's expiry.
local function queue_added(exp, ttl)
  local need = exp - now + 1000
  for _, k in ipairs(QUEUE_KEYS) do
    if redis.call('PTTL', k) < need then
      for _, k2 in ipairs(QUEUE_KEYS) do redis.call('PEXPIRE', k2, need + ttl) end
      return
    end
  end
end

local function enqueue(id, ttl, ch, meta)
  local seq = redis.call('INCR', KEYS[6])
  redis.call('ZADD', KEYS[3], seq, id)
  redis.call('ZADD', KEYS[4], now + ttl, id)
  redis.call('HSET', KEYS[5], id, fmt(ttl) .. '|' .. ch .. '|' .. meta)
end

-- pass_on makes the head of the queue the holder and wakes it with a
-- message on its channel, so a release is one round trip. It reports
-- whether there was a live waiter; the hold it writes replaces any.
local function pass_on()
  prune_queue()
  local head, d = queue_head()
  if not head then return false end
  remove_waiter(head)
  local ttl, ch, meta = string.match(d, '^([^|]*)|([^|]*)|(.*)$')
  local tok = grant(head, tonumber(ttl), meta)
  redis.call('PUBLISH', ch, head .. '|' .. fmt(tok))
  return true
end

-- handoff hands a free lock to the head of the queue.
local function handoff()
  if redis.call('EXISTS', KEYS[1]) == 0 then pass_on() end
end
