-- Prelude of the Mutex scripts (mutex_*.lua). A Mutex has one holder at a
-- time, so its hold is one string key with the lease as its expiry: the
-- uncontended Lock and Unlock touch that key and the counter only. Keys of
-- one name share one Cluster hash tag.
-- KEYS[1] owner    string  "hold id|token|since ms|meta", expires with the lease
-- KEYS[2] counter  string  fencing token counter (expires: next_token)
-- KEYS[3] queue    zset    waiter id -> arrival sequence (FIFO order)
-- KEYS[4] qexp     zset    waiter id -> expiry of the waiter entry (server ms)
-- KEYS[5] qdata    hash    waiter id -> "ttl ms|wake channel|meta"
-- KEYS[6] seq      string  waiter sequence; exists while any waiter entry
--                          does (enqueue draws from it first, and it goes
--                          only with the other queue keys: one expiry, one
--                          DEL), so acquire and release read it, in the
--                          MGET of their fast path, to learn that nobody
--                          waits; found without waiters, the slow path
--                          deletes it
-- KEYS[7] marker   string  set while the server has its data (restart.go);
--                          acquire and poll grant nothing without it

-- next_token draws the token of an acquisition and reserves the 15 after
-- it, which the holder's backend gives when its handles pass the lock among
-- themselves (local.go); it returns the token and its decimal string. c is
-- the server's TIME when the script has read it already, n the counter's
-- value when it has read that (false: missing). A
-- missing counter (new name, reclaimed, or a server restarted without
-- persistence) starts at the server clock in microseconds. The counter
-- expires ttl ms after the later of now and the instant the server clock
-- passes the last token reserved, so that a counter that starts again later
-- starts above every token it gave: an idle name leaves no key behind, and
-- tokens keep growing (see "Fencing tokens" in redislock.go for failover).
-- One SET writes the value and the expiry: a write costs a script more
-- than a read.
local function next_token(ttl, c, n)
  if n == nil then n = redis.call('GET', KEYS[2]) end
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
-- @prune

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

-- grant makes id the holder; n is the counter as next_token takes it.
local function grant(id, ttl, meta, n)
  local tok, s = next_token(ttl, t, n)
  redis.call('SET', KEYS[1], id .. '|' .. s .. '|' .. fmt(now) .. '|' .. meta, 'PX', ttl)
  return tok
end

-- queue_added keeps the queue's keys until a second past exp (server ms),
-- the expiry of an entry just added or refreshed. Keys short of that get a
-- TTL more, so that a busy queue rewrites their expiries about once a TTL
-- rather than at every arrival; a queue left alone still goes within a TTL
-- and a second of its last entry's expiry. Only the queue and the sequence
-- are read: the queue, the expiries and the data gain and lose their
-- entries together (enqueue, remove_waiter), so they are made and emptied
-- together, and every script gives the four keys one expiry or deletes
-- them together; the two read stand for a key the scripts made anew (the
-- zsets and hash) and one they keep (the sequence).
local function queue_added(exp, ttl)
  local need = exp - now + 1000
  if redis.call('PTTL', KEYS[3]) < need or redis.call('PTTL', KEYS[6]) < need then
    for _, k in ipairs(QUEUE_KEYS) do redis.call('PEXPIRE', k, need + ttl) end
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
-- whether there was a live waiter, and whether more entries are left
-- behind it (read in the same ZRANGE, so that a release need not ask
-- again whether the queue's keys can go); the hold it writes replaces any.
-- n is the counter as next_token takes it.
local function pass_on(n)
  prune_queue()
  while true do
    local ids = redis.call('ZRANGE', Q, 0, 1)
    local head = ids[1]
    if not head then return false, false end
    local d = redis.call('HGET', QDATA, head)
    remove_waiter(head)
    if d then
      local ttl, ch, meta = string.match(d, '^([^|]*)|([^|]*)|(.*)$')
      local tok = grant(head, tonumber(ttl), meta, n)
      redis.call('PUBLISH', ch, head .. '|' .. fmt(tok))
      return true, ids[2] ~= nil
    end
  end
end

-- handoff hands a free lock to the head of the queue. It reports whether
-- the lock is held after it; when not, the queue is empty.
local function handoff()
  if redis.call('EXISTS', KEYS[1]) == 1 then return true end
  return (pass_on())
end
